-- Who wrote a variable: 'engine' (a step's vars block, ExecutionHooks.onVarsSet) or 'api' (POST
-- /api/vars). The engine folds its own variables from the event log; templates see the API's on
-- top, whatever their var_type: the spec lets API callers POST var_type step_result too, and such
-- a row must not be taken for the engine's (server/store/vars.ts API_VAR_ROW).
-- NULL: written before this migration, or by a server of the previous version during a rolling
-- upgrade; for those the var_type decides, as it did then (step_result = the engine's).
ALTER TABLE vars ADD COLUMN IF NOT EXISTS written_by text CHECK (written_by IN ('api', 'engine'));
