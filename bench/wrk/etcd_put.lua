-- etcd v3 JSON gateway puts: one line of $BENCH_ETCD_BODIES per key (1,000 keys,
-- lease-sized values, prepared by bench/fixtures.py), cycled; keys split between
-- wrk's threads as in renew.lua.
local report = dofile(os.getenv("BENCH_LUA_DIR") .. "/report.lua")
local threads = 0

function setup(thread)
  thread:set("id", threads)
  threads = threads + 1
end

local reqs, counter

function init(args)
  local nthreads = tonumber(os.getenv("BENCH_WRK_THREADS"))
  reqs = {}
  local i = 0
  for line in io.lines(os.getenv("BENCH_ETCD_BODIES")) do
    if i % nthreads == id then
      reqs[#reqs + 1] = wrk.format("POST", "/v3/kv/put", {["Content-Type"] = "application/json"}, line)
    end
    i = i + 1
  end
  counter = 0
end

function request()
  counter = counter + 1
  return reqs[(counter % #reqs) + 1]
end

done = report.done
