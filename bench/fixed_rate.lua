-- A fixed arrival rate: run with one connection per thread (wrk -t N -c N) and
-- BENCH_THREADS=N. Each thread sends on its own absolute schedule, one request every
-- N / BENCH_RATE seconds from a random phase, so the threads do not fire together.
--
-- Latency is taken from the request's scheduled time, not from when it went out: when the
-- answer to the previous request comes back late, the next request leaves late, and the wait
-- is counted (no coordinated omission). When the connection was free before the scheduled time,
-- the request waited on wrk's millisecond timer, which may fire up to a millisecond early or
-- late; that slack is the client's, not the server's, so latency is then taken from the moment
-- the request was written.
--
-- Environment: BENCH_BODY (the JSON file POSTed), BENCH_RATE (requests per second, all
-- threads together), BENCH_THREADS, BENCH_CONNECTION=close for a new connection per request.
-- done() prints one line, "BENCH_RESULT " and a JSON object, after wrk's own report.

local ffi = require("ffi")
ffi.cdef([[
typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
int clock_gettime(int clock_id, bench_timespec *tp);
]])
local CLOCK_MONOTONIC = 1
local clock = ffi.new("bench_timespec")

local function now()
  ffi.C.clock_gettime(CLOCK_MONOTONIC, clock)
  return tonumber(clock.tv_sec) + tonumber(clock.tv_nsec) * 1e-9
end

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local common = dofile(here .. "wrk_common.lua")

local rate = assert(tonumber(os.getenv("BENCH_RATE")), "BENCH_RATE is not set")
local thread_count = assert(tonumber(os.getenv("BENCH_THREADS")), "BENCH_THREADS is not set")
local interval = thread_count / rate

common.post_from_environment()

-- In the main interpreter: every thread, for done(), and each thread's phase.
local threads = {}

function setup(thread)
  if #threads == 0 then
    math.randomseed(os.time())
  end
  thread:set("phase", math.random())
  threads[#threads + 1] = thread
end

-- In each thread's interpreter. Globals, so that done() can fetch them with thread:get.
samples = {}   -- latency of each answer, ms
answered = 0
non2xx = 0
lost = 0       -- scheduled requests whose connection failed before an answer came
behind = 0     -- requests that left late because the previous answer came back late
scheduled_count = 0

local prepared
local first_slot
local slot, ready, sent_at
local waiting = false

function init(args)
  prepared = wrk.format()
end

function delay()
  local t = now()
  if first_slot == nil then
    first_slot = t + phase * interval
  end
  if waiting then
    lost = lost + 1
  end
  slot = first_slot + scheduled_count * interval
  scheduled_count = scheduled_count + 1
  ready = t
  waiting = true
  if t >= slot then
    behind = behind + 1
    return 0
  end
  return math.ceil((slot - t) * 1000)
end

function request()
  sent_at = now()
  return prepared
end

function response(status, headers, body)
  local t = now()
  local origin = ready > slot and slot or sent_at
  samples[#samples + 1] = (t - origin) * 1000
  answered = answered + 1
  if status < 200 or status > 299 then
    non2xx = non2xx + 1
  end
  waiting = false
end

local function percentile(sorted, p)
  if #sorted == 0 then
    return 0 / 0
  end
  local rank = math.ceil(p / 100 * #sorted)
  return sorted[math.max(rank, 1)]
end

function done(summary, latency, requests)
  local all = {}
  local totals = { answered = 0, non2xx = 0, lost = 0, behind = 0, scheduled = 0 }
  for _, thread in ipairs(threads) do
    for _, sample in ipairs(thread:get("samples")) do
      all[#all + 1] = sample
    end
    totals.answered = totals.answered + thread:get("answered")
    totals.non2xx = totals.non2xx + thread:get("non2xx")
    totals.lost = totals.lost + thread:get("lost")
    totals.behind = totals.behind + thread:get("behind")
    totals.scheduled = totals.scheduled + thread:get("scheduled_count")
  end
  table.sort(all)
  local seconds = summary.duration / 1e6
  local result = {
    mode = "fixed-rate",
    target_rate = rate,
    threads = #threads,
    duration_s = seconds,
    scheduled = totals.scheduled,
    requests = totals.answered,
    rate = totals.answered / seconds,
    behind = totals.behind,
    non2xx = totals.non2xx,
    lost = totals.lost,
    errors = common.errors(summary),
    latency_ms = {
      p50 = percentile(all, 50),
      p90 = percentile(all, 90),
      p99 = percentile(all, 99),
      max = all[#all] or 0 / 0,
    },
  }
  common.print_result(result)
end
