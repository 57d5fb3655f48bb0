-- wrk: POST /v1/workloads with a unique Idempotency-Key per request (thread id + counter).
local counter = 0
local thread_id = 0
local threads = {}
function setup(thread)
  thread:set("id", #threads)
  table.insert(threads, thread)
end
function init(args)
  thread_id = id
end
request = function()
  counter = counter + 1
  local headers = {}
  headers["Authorization"] = "Bearer " .. os.getenv("TESSERA_BENCH_TOKEN")
  headers["Content-Type"] = "application/json"
  headers["Idempotency-Key"] = "wrk-" .. thread_id .. "-" .. counter .. "-" .. os.time()
  return wrk.format("POST", "/v1/workloads", headers, '{"tenant":"submits","gpus":1,"qos":"Burstable"}')
end
