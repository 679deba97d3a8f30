-- wrk script for scripts/serve_bench.sh: POSTs the JPEGs listed in $VIT_BENCH_LIST to /v1/classify (naming
-- the model $VIT_BENCH_MODEL when set) or, with VIT_BENCH_ENDPOINT=embeddings, to /v1/embeddings as OpenAI's
-- client sends them (a JSON body with the photo in base64, for $VIT_BENCH_MODEL, asking for base64
-- embeddings), each connection starting at its own photo, and reports p50/p99 latency as plain numbers.
local bodies, next_body = {}, 1
local counter = 0

local alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local function symbol(k) return alphabet:sub(k + 1, k + 1) end
local function base64(data)
  local out = {}
  for i = 1, #data, 3 do
    local a, b, c = data:byte(i, i + 2)
    local n = a * 65536 + (b or 0) * 256 + (c or 0)
    out[#out + 1] = symbol(math.floor(n / 262144) % 64) .. symbol(math.floor(n / 4096) % 64) ..
                    (b and symbol(math.floor(n / 64) % 64) or "=") .. (c and symbol(n % 64) or "=")
  end
  return table.concat(out)
end

function setup(thread)
  thread:set("id", counter)
  counter = counter + 1
end

function init(args)
  local embeddings = os.getenv("VIT_BENCH_ENDPOINT") == "embeddings"
  for path in io.lines(os.getenv("VIT_BENCH_LIST")) do
    local f = assert(io.open(path, "rb"))
    local bytes = f:read("*a")
    f:close()
    if embeddings then
      bytes = '{"model": "' .. os.getenv("VIT_BENCH_MODEL") .. '", "encoding_format": "base64", ' ..
              '"input": ["data:image/jpeg;base64,' .. base64(bytes) .. '"]}'
    end
    bodies[#bodies + 1] = bytes
  end
  next_body = (id * 37) % #bodies + 1
  wrk.method = "POST"
  local model = os.getenv("VIT_BENCH_MODEL")
  wrk.path = embeddings and "/v1/embeddings" or "/v1/classify" .. (model and ("?model=" .. model) or "")
  wrk.headers["Content-Type"] = embeddings and "application/json" or "image/jpeg"
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
