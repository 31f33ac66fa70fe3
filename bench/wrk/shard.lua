-- Shared by the wrk scripts that split a file of keys between wrk's threads
-- (renew.lua, etcd_put.lua): each thread takes the lines i with
-- i % BENCH_WRK_THREADS == its id, so one key is only ever sent by one thread.
--
-- wrk runs setup() in its main Lua state once per thread before the threads
-- start, and init() and request() in each thread's own state: the ids are
-- counted in the main state and handed to each thread as its global `id`.
local M = {}
local threads = 0

function M.setup(thread)
  thread:set("id", threads)
  threads = threads + 1
end

-- The lines of `path` this thread owns, each passed through `make`.
function M.my_lines(path, make)
  local nthreads = tonumber(os.getenv("BENCH_WRK_THREADS"))
  local mine = {}
  local i = 0
  for line in io.lines(path) do
    if i % nthreads == id then
      mine[#mine + 1] = make(line)
    end
    i = i + 1
  end
  return mine
end

return M
