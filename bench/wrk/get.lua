-- A plain GET / (nginx's fixed 200, poolcoord-hello-tls): the HTTPS ceilings.
local report = dofile(os.getenv("BENCH_LUA_DIR") .. "/report.lua")
wrk.method = "GET"
wrk.path = "/"
done = report.done
