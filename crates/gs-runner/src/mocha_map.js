// git-sandbox's test map for mocha: which functions of the project each test file calls, made by
// a run of its own off the critical path (never the recorded run, whose time the map would
// change). Node loads this file first in every process the command starts (NODE_OPTIONS=
// --require); it does nothing but in a process that runs mocha's command line (mocha 12 is an
// ES module, so its Runner is known by the events it emits, not by how it is loaded). There it
// starts V8's precise coverage (a count per function, no blocks) at once, and takes the
// functions called each time the run moves from one test file to another:
// - what a test file's tests and hooks call counts for that file, and so does what its loading
//   calls (its describe bodies run then: a function one calls that throws stops the whole
//   suite as it loads, so the file that calls it must be in phase one);
// - what runs before the test files load (a --require'd file), as a module of the project is
//   first loaded (its body, what that calls), and in root hooks counts for every test: the
//   map's "outside"; a module first loaded by a test file (or its test) counts for that file
//   too (express's acceptance tests load an example app whose body calls app.use).
// Written once, as JSON, when the run ends. It changes no test, order or output.
"use strict";
(function () {
  const OUT = process.env.GIT_SANDBOX_JS_MAP;
  const ROOT = process.env.GIT_SANDBOX_JS_ROOT;
  if (!OUT || !ROOT) return;
  const path = require("path");
  const fs = require("fs");
  let main = "";
  try {
    main = fs.realpathSync(process.argv[1] || "");
  } catch (e) {
    return;
  }
  // mocha's bin (or the child it starts for node's flags); not a worker of --parallel.
  const parts = main.split(path.sep);
  const mocha = parts.includes("mocha") || /^_?mocha(\.c?js)?$/.test(path.basename(main));
  if (!mocha || path.basename(main) === "worker.js") return;
  try {
    arm();
  } catch (e) {
    // No map: the tests run on.
  }

  function arm() {
    const Module = require("module");
    const EventEmitter = require("events");
    const inspector = require("inspector");
    const session = new inspector.Session();
    session.connect();
    // A session of this thread answers at once.
    const post = (method, params) => {
      let out;
      session.post(method, params || {}, (err, res) => {
        if (err) throw err;
        out = res;
      });
      return out;
    };
    post("Profiler.enable");
    post("Profiler.startPreciseCoverage", { callCount: true, detailed: false });
    const prefix = ROOT.endsWith(path.sep) ? ROOT : ROOT + path.sep;
    const mine = (file) =>
      file.startsWith(prefix) && !file.includes(path.sep + "node_modules" + path.sep);
    const ids = new Map(); // "file start end" -> index
    const functions = []; // [file, startOffset, endOffset]
    const outside = new Set();
    const tests = new Map(); // test file -> Set of indices
    const take = (into) => {
      const { result } = post("Profiler.takePreciseCoverage");
      for (const script of result) {
        if (!script.url.startsWith("file://")) continue;
        let file;
        try {
          file = require("url").fileURLToPath(script.url);
        } catch (e) {
          continue;
        }
        if (!mine(file)) continue;
        for (const f of script.functions) {
          const r = f.ranges[0];
          // A module's own body spans its file and runs as it is loaded, for every test.
          if (!r || r.count === 0 || r.startOffset === 0) continue;
          const key = file + " " + r.startOffset + " " + r.endOffset;
          let i = ids.get(key);
          if (i === undefined) {
            i = functions.length;
            ids.set(key, i);
            functions.push([file, r.startOffset, r.endOffset]);
          }
          into.add(i);
        }
      }
    };
    // Where what runs now counts: a test file's set, or `outside`. Taken only when it changes.
    let current = outside;
    const switchTo = (into) => {
      if (into !== current) {
        take(current);
        current = into;
      }
    };
    const setOf = (file) => {
      if (!file) return outside;
      const abs = path.resolve(file);
      if (!abs.startsWith(prefix)) return outside;
      const key = abs.slice(prefix.length).split(path.sep).join("/");
      if (!tests.has(key)) tests.set(key, new Set());
      return tests.get(key);
    };
    const fileOf = (runnable) => {
      for (let r = runnable; r; r = r.parent) {
        if (r.file) return r.file;
      }
      return null;
    };
    // Loading a module of the project the first time, in a test or a test file's loading,
    // counts for every test, and for that file.
    const load = Module._load;
    let depth = 0;
    // The test file mocha is loading (itself no module "first loaded": its body is its own).
    let loading = null;
    Module._load = function (request, parent, isMain) {
      let first = false;
      if (current !== outside && depth === 0 && typeof request === "string" && /^[./]/.test(request)) {
        try {
          const file = Module._resolveFilename(request, parent, isMain);
          first = mine(file) && !Module._cache[file] && file !== loading;
        } catch (e) {}
      }
      if (!first && depth === 0) return load.apply(this, arguments);
      const was = current;
      if (depth === 0) switchTo({ add: (i) => (was.add(i), outside.add(i)) });
      depth++;
      try {
        return load.apply(this, arguments);
      } finally {
        depth--;
        if (depth === 0) switchTo(was);
      }
    };
    let started = false;
    let written = false;
    const write = () => {
      if (written) return;
      written = true;
      take(current);
      post("Profiler.stopPreciseCoverage");
      // Offsets to lines, by each file's text as V8 read it.
      const starts = new Map();
      const lineAt = (file, offset) => {
        let s = starts.get(file);
        if (!s) {
          s = [0];
          let text = "";
          try {
            text = fs.readFileSync(file, "utf8");
          } catch (e) {}
          if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
          for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) === 10) s.push(i + 1);
          starts.set(file, s);
        }
        let lo = 0;
        let hi = s.length - 1;
        while (lo < hi) {
          const mid = (lo + hi + 1) >> 1;
          if (s[mid] <= offset) lo = mid;
          else hi = mid - 1;
        }
        return lo + 1;
      };
      const out = {
        version: 1,
        functions: functions.map(([file, a, b]) => [
          file.slice(prefix.length).split(path.sep).join("/"),
          lineAt(file, a),
          lineAt(file, Math.max(a, b - 1)),
        ]),
        outside: [...outside].sort((a, b) => a - b),
        tests: {},
      };
      for (const [t, s] of tests) out.tests[t] = [...s].sort((a, b) => a - b);
      try {
        fs.writeFileSync(OUT, JSON.stringify(out));
      } catch (e) {}
    };
    // mocha's root Suite, by its events as it loads each test file (the file is their second
    // argument), and its Runner: a test's or hook's start, and the run's end. The runner of
    // --parallel only replays its workers' events, and makes no map.
    const emit = EventEmitter.prototype.emit;
    EventEmitter.prototype.emit = function (event, arg) {
      const C = this.constructor && this.constructor.constants;
      if (C && C.EVENT_FILE_PRE_REQUIRE === "pre-require" && !started && !written) {
        if (event === C.EVENT_FILE_PRE_REQUIRE && typeof arguments[2] === "string") {
          loading = path.resolve(arguments[2]);
          try {
            loading = fs.realpathSync(loading);
          } catch (e) {}
          switchTo(setOf(arguments[2]));
        } else if (event === C.EVENT_FILE_POST_REQUIRE) {
          loading = null;
          switchTo(outside);
        }
      }
      if (C && C.EVENT_RUN_BEGIN === "start" && !written) {
        if (this.constructor.name === "ParallelBufferedRunner") {
          written = true;
        } else if (event === C.EVENT_RUN_BEGIN && !started) {
          started = true;
          // A mocha a test starts makes no map of its own.
          delete process.env.GIT_SANDBOX_JS_MAP;
          process.on("exit", write);
        } else if (started && (event === C.EVENT_HOOK_BEGIN || event === C.EVENT_TEST_BEGIN)) {
          switchTo(setOf(fileOf(arg)));
        } else if (started && event === C.EVENT_RUN_END) {
          write();
        }
      }
      return emit.apply(this, arguments);
    };
  }
})();
