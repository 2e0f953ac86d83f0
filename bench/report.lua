--- bench/report.lua — the text of docs/benchmarks.md around the table bench/run.lua measured:
-- what each row measures, how to read the columns, and how to rerun it.
--   dofile("bench/report.lua")(info) -> markdown, where info = { header = {lines},
--   table_text = "...", notes = {"- ..."}, rounds = n, n = run.lua's workload sizes,
--   sections = {the sections that ran}, all_sections = boolean }
return function(info)
  local n = info.n
  local out = {}
  local function add(...)
    for _, text in ipairs({ ... }) do out[#out + 1] = text end
  end
  local ran = {}
  for _, s in ipairs(info.sections) do ran[#ran + 1] = s.id end

  add("# Benchmarks", "", "Written by `make bench` (bench/run.lua).", "")
  for _, line in ipairs(info.header) do add("- " .. line) end
  add("")
  if not info.all_sections then
    add("**A partial run** (BENCH_ONLY): only " .. table.concat(ran, ", ") .. ".", "")
  end
  add(info.table_text, "")
  if #info.notes > 0 then add("Notes from this run:", "", table.concat(info.notes, "\n"), "") end

  add("## How to read it", "",
      "- One throwaway standalone ZooKeeper server on loopback (the project's own harness, " ..
      "`zklua.testing`) serves every client in one run. Each round runs every section, and in " ..
      "each section every client once, taking turns (a different client starts each round); " ..
      "each cell is the median of the rounds' figures (" .. info.rounds .. " here). The " ..
      "client operations, short runs whose CPU per op wanders most, run " ..
      info.ops_repeats .. " times per round, and their cells are the best quartile of the " ..
      info.rounds * info.ops_repeats .. " samples: the 25th percentile of CPU per op, the " ..
      "75th of ops/s. What disturbs a run on a shared VM (stolen time, other tenants, a " ..
      "thread woken on a cold core) only ever adds CPU and wall time, so the better samples " ..
      "are the nearer to a client's own cost, and a quartile rather than the single best " ..
      "keeps one lucky run from deciding; every client is measured the same way. The notes " ..
      "give how far the per-sample ratios to raw C spread. A sample during which the " ..
      "hypervisor stole more than a few percent of the " ..
      "VM's CPU time (the steal column of /proc/stat) is run again, up to twice: stolen " ..
      "time inflates the CPU a process is charged per op by tens of percent, in bursts that " ..
      "hit one client of a sample and not the next. Before each client starts, the runner " ..
      "waits until the server is idle, so no client pays for the garbage or the load the one " ..
      "before it left.",
      "- **raw C** is a plain libzookeeper-mt program (bench/raw_c.c), the ceiling for a " ..
      "client on that library. **zklua (Lua 5.4)** is `./zklua`; **zklua (LuaJIT)** the same " ..
      "scripts under `luajit` with build/luajit/zklua/core.so (`make luajit`), worker " ..
      "processes included. **kazoo** is Debian's python3-kazoo under /usr/bin/python3.",
      "- **zklua/C** and **zklua/kazoo** divide the Lua 5.4 figure by the other client's " ..
      "figure, as shown in the table. Above 1 is " ..
      "better for ops/s and cycles/s, below 1 is better for CPU, ms and MiB. Targets relative " ..
      "to another client are judged on these ratios.",
      "- **target** is the issue's target and whether the Lua 5.4 column meets it (and the " ..
      "LuaJIT column, when it differs). No target: the issues set none for that row.",
      "- An empty cell: that client has no such workload (raw C has no recipes; kazoo has no " ..
      "PartitionAllocator, and its partition function is round_robin only), or it could " ..
      "not run it (a note above says why).",
      "- The server runs on the same cores as the clients (and, in the nginx rows, as nginx " ..
      "and wrk), so throughput and latency are " ..
      "partly the server's; client CPU per op (user+sys of the client process, library " ..
      "threads included) is the client's own cost.", "")

  add("## What each row measures", "",
      string.format("- **Client operations** (bench/raw_c.c, bench/zklua_bench.lua, " ..
        "bench/kazoo_bench.py): %d pipelined async gets of a 64-byte node (all submitted, " ..
        "then every result awaited), %d sync gets, %d sync creates of 16-byte persistent " ..
        "nodes; ops/s over wall time, and client CPU per op. zklua and kazoo end each " ..
        "workload's measurement with a full garbage collection, so each pays for its own " ..
        "garbage (not the next workload).", n.async, n.sync_get,
        n.sync_create),
      string.format("- **Lock** (bench/lock_bench.lua, bench/kazoo_lock_bench.py): %d " ..
        "uncontended acquire()+release() cycles of one Lock by one client; then %d worker " ..
        "processes (a session each) take turns on one Lock %d times each, re-queueing at " ..
        "once, and the hand-off latency is the time from one holder calling release() to the " ..
        "next holder's acquire() returning (CLOCK_MONOTONIC, shared by the processes).",
        n.lock_cycles, n.lock_waiters, n.lock_rounds),
      string.format("- **Election** (bench/election_bench.lua; kazoo members: " ..
        "bench/kazoo_election_worker.py): three member processes; the driver ends the " ..
        "leader's term and times until the next leader's function runs. Leader returns: it " ..
        "returns from its leader function (a clean hand-over). Leader killed: kill -9 of its " ..
        "process; the next leader waits for the server to expire the dead session (%g s " ..
        "timeout, counted from the dead client's last ping, so the figure can be a little " ..
        "under it). %d failovers of each kind per round; the row is the median of the " ..
        "rounds' medians.", n.session, n.failovers),
      string.format("- **SetPartitioner** (bench/partitioner_bench.lua; kazoo members: " ..
        "bench/kazoo_partitioner_member.py): %d member processes each run the seed's loop " ..
        "over %d items with time_boundary %g s; each event is timed from the leave (finish()), " ..
        "the kill -9 (plus the %g s session expiry no client can shorten) or the new member's " ..
        "join to the moment every live member ACQUIRED its new share and the shares cover the " ..
        "set. One leave, one crash and two joins per round.", n.sp_members, n.sp_items,
        n.sp_tb, n.session),
      string.format("- **PartitionAllocator** (bench/allocator_bench.lua): %d members in " ..
        "one process, each its own session, share %d items; each event is timed until every " ..
        "member holds exactly its share of the new assignment (wait_settled). Crash: a " ..
        "member's session is closed without leaving, so the server drops its nodes at once " ..
        "(a kill -9 would add the session timeout, as in the SetPartitioner rows). Items " ..
        "moved: items whose owner changed on the join.", n.alloc_members, n.alloc_items),
      "- **Strategies** (bench/strategies_bench.lua, no server): the strategy functions the " ..
      "allocator calls (zklua.strategies), timed with Lua tables in and out; sticky, weighted " ..
      "and least_loaded get the current ownership of 99 members with a 100th joining, as an " ..
      "allocator passes it. Items moved: when an 11th member joins 10 sharing 1000 items " ..
      "(ideal 1000/11). round_robin is kazoo's stride, so it also stands for kazoo's " ..
      "SetPartitioner.",
      string.format("- **TreeCache** (bench/tree_cache_bench.lua, " ..
        "bench/kazoo_tree_cache_bench.py): %d nodes under a root (directories of 99 nodes " ..
        "each; 32-byte values), made once; each client starts a TreeCache on it and " ..
        "the time runs from start() to INITIALIZED; RSS is VmRSS after a full garbage " ..
        "collection, growth is over the same client before the cache, peak is VmHWM.",
        n.tree_nodes - 1),
      string.format("- **nginx** (bench/nginx_bench.lua; the service is examples/nginx/nginx.conf " ..
        "as it is, on a free port): a 4-worker nginx (Debian's " ..
        "nginx and libnginx-mod-http-lua) on a free loopback port, each worker with its own " ..
        "session under zklua.handlers.ngx (zklua's LuaJIT module, so its figures sit in the " ..
        "LuaJIT column), a DataWatch on the config znode, a Counter its requests share and an " ..
        "Election it competes in; run once with the handler's event-driven wake-ups " ..
        "(wakeup=socket, the default) and once with the timer poller (wakeup=timer), taking " ..
        "turns. GET /get does one zk:get of the config in the request, GET /static no " ..
        "ZooKeeper call (the nginx ceiling on this machine), GET /counter one Counter:add(1). " ..
        "wrk --latency runs %g s per figure: /get at 1 connection gives p50 and p90, compared " ..
        "to ./zklua's sync get latency (bench/sync_get_latency.lua, %d sequential gets, each " ..
        "timed) measured in the same round; /get and /static give req/s at 1, 50 and 200 " ..
        "connections, /get's shown as a ratio to /static's in the same run. Idle worker: once " ..
        "every worker answered /status, each worker serving nothing is watched for %g s: its " ..
        "event-loop thread's voluntary context switches (/proc/PID/status), those of all its " ..
        "threads (/proc/PID/task/*/status), and its CPU time (utime+stime of /proc/PID/stat), " ..
        "per second, the mean of the 4 workers. Counter: %d bursts of 200 GET /counter sent at " ..
        "once on 200 connections made beforehand (spread over the workers by reuseport), each " ..
        "timed from its send to its answer; kazoo does the same 200 increments from 4 client " ..
        "processes of 50 threads (bench/kazoo_counter_bench.py), every thread released at " ..
        "once, each process with ONE Counter its threads share, as kazoo's users would: kazoo's " ..
        "Counter keeps the value and version of an increment in locals and its client runs a " ..
        "fresh copy of the retry policy per call, so only its pre_value/post_value attributes " ..
        "are shared (not read here). p50 and p99 of all the increments; both check the " ..
        "counter's final value. kazoo's column holds the same figure on both modes' rows.",
        n.nginx_seconds, n.sync_get, n.nginx_idle, n.counter_bursts),
      string.format("- **TLS** (bench/zklua_bench.lua and bench/kazoo_bench.py with " ..
        "BENCH_TLS_CA/CERT/KEY and BENCH_N_CONNECT): a second server, started with the " ..
        "harness's tls option, serves a TLS port and a plain port (Netty serves both; the other " ..
        "sections keep the default server). Each client runs the client-op workloads above and " ..
        "%d connects (start, then close: TCP, the TLS handshake with certificate verification " ..
        "both ways, the session) once over each port, back to back; the cost rows divide its " ..
        "CPU per op over TLS by its own over plaintext, the target being that TLS costs zklua " ..
        "no more than it costs kazoo, relatively (issue 22). raw C has no cell: Debian's " ..
        "libzookeeper-mt is built without TLS.", n.tls_connects), "")

  add("## Rerun", "",
      "`make bench` (a few minutes; run it on a quiet machine). `BENCH_ROUNDS=5 make bench` " ..
      "for more rounds. Knobs (environment, see bench/run.lua): BENCH_OPS_REPEATS, BENCH_STEAL_MAX, " ..
      "BENCH_STEAL_RETRIES, BENCH_N_ASYNC, " ..
      "BENCH_N_SYNC_GET, BENCH_N_SYNC_CREATE, BENCH_LOCK_CYCLES, BENCH_LOCK_WAITERS, " ..
      "BENCH_LOCK_ROUNDS, BENCH_FAILOVERS, BENCH_SESSION_S, BENCH_SP_MEMBERS, BENCH_SP_ITEMS, " ..
      "BENCH_SP_TB, BENCH_ALLOC_MEMBERS, BENCH_ALLOC_ITEMS, BENCH_STRATEGY_RUNS, " ..
      "BENCH_TREE_NODES, BENCH_NGINX_SECONDS, BENCH_NGINX_IDLE_S, BENCH_COUNTER_BURSTS, " ..
      "BENCH_TLS_CONNECTS; " ..
      "`BENCH_ONLY=lock,election` runs some sections only (it then " ..
      "writes no file unless BENCH_DOC names one). Every workload script also runs alone " ..
      "against any server; its usage is in its opening comment, e.g. " ..
      "`./zklua bench/lock_bench.lua HOST:PORT`.", "")
  return table.concat(out, "\n")
end
