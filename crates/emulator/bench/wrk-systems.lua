-- wrk script: spread ComputerSystem GETs uniformly over the whole fleet.
-- Usage: SYSTEMS=10000 wrk -t1 -c64 -d20s -s wrk-systems.lua \
--          -H "Authorization: Basic YWRtaW46cGFzc3dvcmQ=" http://127.0.0.1:PORT
local systems = tonumber(os.getenv("SYSTEMS") or "10000")

function setup(thread)
  thread:set("seed", math.random(1, 1000000))
end

function init(args)
  math.randomseed(seed or os.time())
end

function request()
  return wrk.format("GET", "/redfish/v1/Systems/sys-" .. math.random(0, systems - 1))
end
