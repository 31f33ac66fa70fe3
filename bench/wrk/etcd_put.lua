-- etcd v3 JSON gateway puts: one line of $BENCH_ETCD_BODIES per key (1,000 keys,
-- lease-sized values, prepared by bench/fixtures.py), cycled; keys split between
-- wrk's threads as in renew.lua.
local report = dofile(os.getenv("BENCH_LUA_DIR") .. "/report.lua")
local shard = dofile(os.getenv("BENCH_LUA_DIR") .. "/shard.lua")

setup = shard.setup

local reqs, counter

function init(args)
  reqs = shard.my_lines(os.getenv("BENCH_ETCD_BODIES"), function(line)
    return wrk.format("POST", "/v3/kv/put", {["Content-Type"] = "application/json"}, line)
  end)
  counter = 0
end

function request()
  counter = counter + 1
  return reqs[(counter % #reqs) + 1]
end

done = report.done
