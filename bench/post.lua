-- Saturation: each connection sends the next request as soon as the last answer is in.
--
-- Environment: BENCH_BODY, the file whose content is POSTed as application/json;
-- BENCH_CONNECTION=close asks for a new connection (and TLS handshake) per request.
-- done() prints one line, "BENCH_RESULT " and a JSON object, after wrk's own report.

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local common = dofile(here .. "wrk_common.lua")

common.post_from_environment()

function done(summary, latency, requests)
  local seconds = summary.duration / 1e6
  local result = {
    mode = "saturation",
    requests = summary.requests,
    duration_s = seconds,
    rate = summary.requests / seconds,
    errors = common.errors(summary),
    latency_ms = {
      p50 = latency:percentile(50) / 1000,
      p90 = latency:percentile(90) / 1000,
      p99 = latency:percentile(99) / 1000,
      max = latency.max / 1000,
    },
  }
  common.print_result(result)
end
