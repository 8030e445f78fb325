// The shell page (issue #37): xterm.js wired to the shell server's WebSocket (protocol: the header
// of deploy/libexec/user-shell). A dropped connection reconnects to the same shell, asking only for
// the output it has not shown yet; an ended shell says why and stays ended.
(function () {
  "use strict";
  var PING_MS = 20000; // keeps proxies and the gateway from closing an idle connection
  var RETRY_MS = 2000;
  var GIVE_UP_MS = 30000; // about the server's reconnect window
  var REPLACED = 4000, ENDED = 4001, POLICY = 1008;
  var term = new Terminal({cursorBlink: true, scrollback: 5000, fontSize: 14});
  var fit = new FitAddon.FitAddon();
  term.loadAddon(fit);
  term.open(document.getElementById("term"));
  fit.fit();
  term.focus();
  var encoder = new TextEncoder();
  var socket = null, seen = 0, finished = false, lostAt = null, pinger = null;

  function send(object) {
    if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(object));
  }
  function resize() { send({type: "resize", cols: term.cols, rows: term.rows}); }
  function finish(message) {
    finished = true;
    if (message) term.write("\r\n\x1b[1m[" + message + "]\x1b[0m\r\n");
    document.title = "Shell (ended)";
  }

  function connect() {
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    socket = new WebSocket(scheme + location.host + "/ws?seen=" + seen);
    socket.binaryType = "arraybuffer";
    socket.onopen = function () {
      lostAt = null;
      resize();
      clearInterval(pinger);
      pinger = setInterval(function () { send({type: "ping"}); }, PING_MS);
    };
    socket.onmessage = function (event) {
      if (typeof event.data === "string") {
        var message = JSON.parse(event.data);
        if (message.type === "exit") finished = true;
        return;
      }
      var bytes = new Uint8Array(event.data);
      seen += bytes.length;
      term.write(bytes);
    };
    socket.onclose = function (event) {
      clearInterval(pinger);
      if (finished || event.code === ENDED) return finish(null);
      if (event.code === REPLACED) return finish("Opened in another tab.");
      if (event.code === POLICY) return finish("Signed out: open the shell again from the portal.");
      if (lostAt === null) {
        lostAt = Date.now();
        term.write("\r\n\x1b[2m[connection lost; reconnecting…]\x1b[0m\r\n");
      }
      if (Date.now() - lostAt > GIVE_UP_MS) return finish("Could not reconnect: open Shell from the portal again.");
      setTimeout(connect, RETRY_MS);
    };
  }

  term.onData(function (data) {
    if (socket && socket.readyState === WebSocket.OPEN) socket.send(encoder.encode(data));
  });
  term.onBinary(function (data) {
    var bytes = new Uint8Array(data.length);
    for (var i = 0; i < data.length; i++) bytes[i] = data.charCodeAt(i) & 255;
    if (socket && socket.readyState === WebSocket.OPEN) socket.send(bytes);
  });
  window.addEventListener("resize", function () { fit.fit(); resize(); });
  connect();
})();
