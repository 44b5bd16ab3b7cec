-- What both wrk scripts share: the POST they send, set from the environment, and the JSON
-- encoding of the result line done() prints. Loaded with dofile() from the scripts' folder.
--
-- Environment: BENCH_BODY, the file whose content is POSTed as application/json;
-- BENCH_CONNECTION=close asks for a new connection (and TLS handshake) per request.

local common = {}

local function read_file(path)
  local file = assert(io.open(path, "rb"))
  local content = file:read("*a")
  file:close()
  return content
end

function common.encode(value)
  if type(value) == "table" then
    local parts = {}
    for key, item in pairs(value) do
      parts[#parts + 1] = '"' .. key .. '":' .. common.encode(item)
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

function common.post_from_environment()
  wrk.method = "POST"
  wrk.body = read_file(assert(os.getenv("BENCH_BODY"), "BENCH_BODY is not set"))
  wrk.headers["Content-Type"] = "application/json"
  if os.getenv("BENCH_CONNECTION") == "close" then
    wrk.headers["Connection"] = "close"
  end
end

-- wrk's socket errors and non-2xx answers, as the result line names them.
function common.errors(summary)
  return {
    connect = summary.errors.connect,
    read = summary.errors.read,
    write = summary.errors.write,
    status = summary.errors.status,
    timeout = summary.errors.timeout,
  }
end

function common.print_result(result)
  io.write("BENCH_RESULT ", common.encode(result), "\n")
end

return common
