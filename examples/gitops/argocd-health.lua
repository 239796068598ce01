-- Argo CD health check for the playflow.io resources (Playbook, Credential, WorkerPool).
-- Install it for each kind under `resource.customizations.health.playflow.io_<Kind>` in the
-- argocd-cm ConfigMap (examples/gitops/argocd-cm.yaml). It reads the operator's status the way
-- kstatus does (Flux, `kubectl wait`):
--   no status yet / generation not observed        -> Progressing
--   being deleted                                   -> Progressing (the finalizer cleans up)
--   Stalled=True (invalid spec, ownership conflict) -> Degraded, with the reason and message
--   Ready=True                                      -> Healthy
--   Ready=False otherwise (server unavailable,
--   Secret not found yet, ...)                      -> Progressing, with the reason and message
local hs = { status = "Progressing", message = "Waiting for the Playflow operator" }

if obj.metadata ~= nil and obj.metadata.deletionTimestamp ~= nil then
  hs.message = "Being deleted: waiting for the Playflow operator's finalizer"
  return hs
end
if obj.status == nil then
  return hs
end

local generation = obj.metadata and obj.metadata.generation
local observed = obj.status.observedGeneration
if generation ~= nil and (observed == nil or observed < generation) then
  hs.message = "Waiting for the Playflow operator to observe generation " .. tostring(generation)
  return hs
end

local ready = nil
local stalled = nil
if obj.status.conditions ~= nil then
  for _, c in ipairs(obj.status.conditions) do
    if c.type == "Ready" then ready = c end
    if c.type == "Stalled" then stalled = c end
  end
end

local function describe(c)
  local text = c.reason or ""
  if c.message ~= nil and c.message ~= "" then text = text .. ": " .. c.message end
  return text
end

if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = describe(stalled)
  return hs
end
if ready == nil then
  return hs
end
if ready.status == "True" then
  hs.status = "Healthy"
  hs.message = ready.message or ""
  return hs
end
hs.message = describe(ready)
return hs
