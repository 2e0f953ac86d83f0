--- Loaded once, before any spec file (.busted's helper), so that busted's insulation, which
-- unloads what each spec file required, never unloads these modules.  cqueues' C modules
-- cannot be opened twice in one Lua state: opening _cqueues again re-registers each class's
-- __gc with a placeholder upvalue before it sets the real one, and a collection step in
-- between finalises an older spec file's condition variables through that placeholder
-- ("CQS Condition expected, got userdata").  LuaJIT propagates a finaliser's error, so it
-- surfaced as a raw error in whatever ran then (`require "cqueues"` in a later spec file).
require "cqueues"
require "cqueues.condition"
