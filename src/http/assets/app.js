// git-sandbox dashboard: the live activity feed (server-sent events). No build step.
(function () {
  "use strict";
  var feed = document.getElementById("feed");
  if (!feed || !window.EventSource) return;
  var since = feed.getAttribute("data-since") || "";
  var url = "/api/v1/events/stream" + (since ? "?since=" + encodeURIComponent(since) : "");
  var source = new EventSource(url);
  function line(e) {
    var li = document.createElement("li");
    li.className = "new";
    li.setAttribute("data-id", e.id);
    var text = e.time.slice(11, 19) + " " + e.kind;
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
      s.textContent = " " + e.data.status;
      li.appendChild(s);
    }
    return li;
  }
  source.onmessage = add;
  function add(m) {
    var e;
    try { e = JSON.parse(m.data); } catch (_) { return; }
    if (feed.querySelector('li[data-id="' + e.id + '"]')) return;
    feed.insertBefore(line(e), feed.firstChild);
    while (feed.children.length > 200) feed.removeChild(feed.lastChild);
  }
})();
