-- wrk script for scripts/serve_bench.sh: POSTs the JPEGs listed in $VIT_BENCH_LIST to /v1/classify, each
-- connection starting at its own photo, and reports p50/p99 latency as plain numbers.
local bodies, next_body = {}, 1
local counter = 0

function setup(thread)
  thread:set("id", counter)
  counter = counter + 1
end

function init(args)
  for path in io.lines(os.getenv("VIT_BENCH_LIST")) do
    local f = assert(io.open(path, "rb"))
    bodies[#bodies + 1] = f:read("*a")
    f:close()
  end
  next_body = (id * 37) % #bodies + 1
  wrk.method = "POST"
  wrk.path = "/v1/classify"
  wrk.headers["Content-Type"] = "image/jpeg"
end

function request()
  local body = bodies[next_body]
  next_body = next_body % #bodies + 1
  return wrk.format(nil, nil, nil, body)
end

function done(summary, latency, requests)
  io.write(string.format("RESULT requests=%d errors=%d elapsed=%.3f p50_ms=%.2f p99_ms=%.2f\n", summary.requests,
    summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    summary.duration / 1e6, latency:percentile(50) / 1e3, latency:percentile(99) / 1e3))
end
