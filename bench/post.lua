-- Saturation: each connection sends the next request as soon as the last answer is in.
--
-- Environment: BENCH_BODY, the file whose content is POSTed as application/json;
-- BENCH_CONNECTION=close asks for a new connection (and TLS handshake) per request.
-- done() prints one line, "BENCH_RESULT " and a JSON object, after wrk's own report.

local function read_file(path)
  local file = assert(io.open(path, "rb"))
  local content = file:read("*a")
  file:close()
  return content
end

local function encode(value)
  if type(value) == "table" then
    local parts = {}
    for key, item in pairs(value) do
      parts[#parts + 1] = '"' .. key .. '":' .. encode(item)
    end
    return "{" .. table.concat(parts, ",") .. "}"
  end
  if type(value) == "string" then
    return '"' .. value .. '"'
  end
  if value ~= value or value == math.huge or value == -math.huge then
    return "null"
  end
  if value == math.floor(value) then
    return string.format("%d", value)
  end
  return string.format("%.4f", value)
end

wrk.method = "POST"
wrk.body = read_file(assert(os.getenv("BENCH_BODY"), "BENCH_BODY is not set"))
wrk.headers["Content-Type"] = "application/json"
if os.getenv("BENCH_CONNECTION") == "close" then
  wrk.headers["Connection"] = "close"
end

function done(summary, latency, requests)
  local seconds = summary.duration / 1e6
  local result = {
    mode = "saturation",
    requests = summary.requests,
    duration_s = seconds,
    rate = summary.requests / seconds,
    errors = {
      connect = summary.errors.connect,
      read = summary.errors.read,
      write = summary.errors.write,
      status = summary.errors.status,
      timeout = summary.errors.timeout,
    },
    latency_ms = {
      p50 = latency:percentile(50) / 1000,
      p90 = latency:percentile(90) / 1000,
      p99 = latency:percentile(99) / 1000,
      max = latency.max / 1000,
    },
  }
  io.write("BENCH_RESULT ", encode(result), "\n")
end
