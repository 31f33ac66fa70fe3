-- DelegatedLease renewals: the pool leader merge-PATCHes spec.renewTime of one of
-- its pool's nodes, with its own bearer token. Keys ("token<TAB>node" lines in
-- $BENCH_KEYS) are split between wrk's threads, so one key is only ever renewed by
-- one thread, in order: renewTime = $BENCH_RENEW_BASE (unix seconds) + a per-thread
-- counter in microseconds, which never goes backwards for a key.
local report = dofile(os.getenv("BENCH_LUA_DIR") .. "/report.lua")
local threads = 0

function setup(thread)
  thread:set("id", threads)
  threads = threads + 1
end

local keys, counter, base, cached_sec, cached_prefix

function init(args)
  local nthreads = tonumber(os.getenv("BENCH_WRK_THREADS"))
  base = tonumber(os.getenv("BENCH_RENEW_BASE"))
  keys = {}
  local i = 0
  for line in io.lines(os.getenv("BENCH_KEYS")) do
    if i % nthreads == id then
      local token, node = line:match("^([^\t]+)\t([^\t]+)")
      keys[#keys + 1] = {
        path = "/apis/coordination.pool/v1alpha1/delegatedleases/" .. node,
        headers = {
          ["Authorization"] = "Bearer " .. token,
          ["Content-Type"] = "application/merge-patch+json",
          ["Accept"] = "application/json",
        },
      }
    end
    i = i + 1
  end
  counter = 0
end

function request()
  counter = counter + 1
  local k = keys[(counter % #keys) + 1]
  local sec = base + math.floor(counter / 1000000)
  if sec ~= cached_sec then
    cached_sec = sec
    cached_prefix = os.date("!%Y-%m-%dT%H:%M:%S", sec)
  end
  local body = string.format('{"spec":{"renewTime":"%s.%06dZ"}}', cached_prefix, counter % 1000000)
  return wrk.format("PATCH", k.path, k.headers, body)
end

done = report.done
