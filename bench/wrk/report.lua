-- Shared by the wrk scripts of bench/run.sh: prints one JSON line with the figures
-- (latencies in microseconds), which bench/report.py reads.
local M = {}

function M.done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests":%d,"duration_s":%.3f,"rps":%.1f,"mean_us":%.0f,"p50_us":%d,"p90_us":%d,' ..
    '"p99_us":%d,"p999_us":%d,"max_us":%d,"non2xx3xx":%d,"socket_errors":%d}\n',
    summary.requests, summary.duration / 1e6, summary.requests / (summary.duration / 1e6),
    latency.mean, latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency:percentile(99.9), latency.max, e.status, e.connect + e.read + e.write + e.timeout))
end

return M
