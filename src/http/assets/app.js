// git-sandbox dashboard: times in the viewer's zone, confirmations, the live activity feed
// (server-sent events). No build step; no inline script, so a strict Content-Security-Policy fits.
(function () {
  "use strict";
  function pad(n) { return (n < 10 ? "0" : "") + n; }
  var zone = "";
  try { zone = Intl.DateTimeFormat().resolvedOptions().timeZone || ""; } catch (_) {}
  // A <time datetime="…Z"> shows the time of day (with data-date the day too) where the viewer is.
  function local(t) {
    var d = new Date(t.getAttribute("datetime"));
    if (isNaN(d.getTime())) return;
    var text = pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds());
    if (t.hasAttribute("data-date")) {
      text = d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " + text;
    }
    t.textContent = text;
    t.title = t.getAttribute("datetime") + (zone ? " · shown in " + zone : "");
  }
  Array.prototype.forEach.call(document.querySelectorAll("time[datetime]"), local);

  document.addEventListener("click", function (e) {
    var b = e.target.closest && e.target.closest("[data-confirm]");
    if (b && !window.confirm(b.getAttribute("data-confirm"))) e.preventDefault();
  });

  // The records' words as the server's pages show them (src/http/pages/words.rs).
  function plain(w) { return String(w).replace(/[_.]/g, " "); }
  function status(w) {
    return { timeout: "timed out", not_run: "not run", unknown: "status unknown" }[w] || plain(w);
  }

  var feed = document.getElementById("feed");
  if (!feed || !window.EventSource) return;
  var heartbeats = feed.getAttribute("data-heartbeats") === "1";
  var since = feed.getAttribute("data-since") || "";
  var url = "/api/v1/events/stream" + (since ? "?since=" + encodeURIComponent(since) : "");
  var source = new EventSource(url);
  function line(e) {
    var li = document.createElement("li");
    li.className = "new";
    li.setAttribute("data-id", e.id);
    var t = document.createElement("time");
    t.setAttribute("datetime", e.time);
    t.textContent = e.time.slice(11, 19);
    local(t);
    li.appendChild(t);
    li.appendChild(document.createTextNode(" "));
    var k = document.createElement("span");
    k.className = "kind";
    k.title = e.kind;
    k.textContent = plain(e.kind);
    li.appendChild(k);
    var text = "";
    if (e.repository) text += " · " + e.repository;
    if (e.commit) text += " · ";
    li.appendChild(document.createTextNode(text));
    if (e.commit) {
      var a = document.createElement("a");
      a.href = "/c/" + encodeURIComponent(e.repository || e.repository_id) + "/" + e.commit;
      a.className = "mono";
      a.textContent = e.commit.slice(0, 7);
      li.appendChild(a);
    }
    if (e.data && e.data.status) {
      var s = document.createElement("span");
      s.className = e.data.status;
      s.textContent = " " + status(e.data.status);
      li.appendChild(s);
    }
    if (e.data && e.data.test) {
      var f = document.createElement("span");
      f.className = "failed mono";
      f.textContent = " " + e.data.test;
      li.appendChild(f);
      if (e.data.withdrawn === true) {
        li.appendChild(document.createTextNode(" (withdrawn: the run did not fail it)"));
      }
    }
    return li;
  }
  source.onmessage = add;
  function add(m) {
    var e;
    try { e = JSON.parse(m.data); } catch (_) { return; }
    if (!heartbeats && e.kind === "daemon.heartbeat") return;
    if (feed.querySelector('li[data-id="' + e.id + '"]')) return;
    feed.insertBefore(line(e), feed.firstChild);
    while (feed.children.length > 200) feed.removeChild(feed.lastChild);
  }
})();
