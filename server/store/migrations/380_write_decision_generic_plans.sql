-- The decision's functions (migrations 340-360) keep one plan per statement and connection.
--
-- Why: PL/pgSQL hands each statement to the plan cache, whose default (plan_cache_mode = auto)
-- plans the first five calls for their parameters and then keeps the generic plan only if it costs
-- no more than those did. Some of these statements never pass that test and were planned again on
-- every call. Their plans cannot differ anyway: every statement finds its rows by execution id,
-- queue id or the inputs' own jsonb, where the value changes nothing the planner knows.
-- `node dist/bench/decision-write.js`, three alternating pairs with and without this file (µs):
-- step 211/204/204 -> 201/193/198, claim 104/100/96 -> 89/86/86, start 126/124/119 -> 114/111/112,
-- end 136/139/134 -> 130/123/130.
--
-- A function's SET clause applies to what it calls: playflow_decision_current, inside the write,
-- and also alone (the guard's own statement), has it as well.
--
-- CREATE OR REPLACE FUNCTION drops a SET clause it does not repeat: a later migration that
-- redefines one of these must say it again (server/store/migrate.test.ts checks).
ALTER FUNCTION playflow_decision_current(bigint, integer, jsonb, jsonb) SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION playflow_write_decision(bigint, jsonb, jsonb, jsonb, text, jsonb, jsonb, jsonb, boolean, integer, jsonb, boolean,
  jsonb, integer, jsonb, jsonb, boolean, integer, jsonb, jsonb, integer, jsonb) SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION playflow_write_decision_or_stale(bigint, jsonb, jsonb, jsonb, text, jsonb, jsonb, jsonb, boolean, integer, jsonb, boolean,
  jsonb, integer, jsonb, jsonb, boolean, integer, jsonb, jsonb, integer, jsonb) SET plan_cache_mode = force_generic_plan;
