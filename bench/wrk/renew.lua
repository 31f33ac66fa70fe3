-- DelegatedLease renewals: the pool leader merge-PATCHes spec.renewTime of one of
-- its pool's nodes, with its own bearer token. Keys ("token<TAB>node" lines in
-- $BENCH_KEYS) are split between wrk's threads, so one key is only ever renewed by
-- one thread, in order: renewTime = $BENCH_RENEW_BASE (unix seconds) + a per-thread
-- counter in microseconds, which never goes backwards for a key.
local report = dofile(os.getenv("BENCH_LUA_DIR") .. "/report.lua")
local shard = dofile(os.getenv("BENCH_LUA_DIR") .. "/shard.lua")

setup = shard.setup

local keys, counter, base, cached_sec, cached_prefix

function init(args)
  base = tonumber(os.getenv("BENCH_RENEW_BASE"))
  keys = shard.my_lines(os.getenv("BENCH_KEYS"), function(line)
    local token, node = line:match("^([^\t]+)\t([^\t]+)")
    return {
      path = "/apis/coordination.pool/v1alpha1/delegatedleases/" .. node,
      headers = {
        ["Authorization"] = "Bearer " .. token,
        ["Content-Type"] = "application/merge-patch+json",
        ["Accept"] = "application/json",
      },
    }
  end)
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
