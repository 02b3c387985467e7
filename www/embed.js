// rankscope's embedding helper for host pages (docs/embedding.md). A classic script, no
// dependencies: <script src="https://your.host/tools/rankscope/embed.js"></script>, then
//
//   const rs = rankscope.embed(document.querySelector('iframe'), 'https://your.host/tools/rankscope/');
//   rs.on('analysis', ({ report }) => console.log(report.findings));
//   rs.open([{ name: 'rank0.json', buffer }], 'job 42');   // ArrayBuffers are transferred
//   rs.show({ view: 'timeline', rank: 3, step: 12 });
//   rs.compare({ name: 'last-week.rsdigest', buffer });    // a baseline: 'comparison' events
//
// It points the iframe at the app with ?embed=1&origin=<this page's origin> (so the frame trusts
// this page and no other), sends 'PING' until the frame answers 'PONG' (for at most
// options.timeoutMs, 10 s: then an 'error' event says why it may not have), and addresses every
// message to the app's origin only. Traces go from this page to the frame and nowhere else.
(function () {
  'use strict';

  // How long the frame has to answer PING before the handshake is given up (options.timeoutMs).
  const TIMEOUT_MS = 10000;

  function embed(iframe, appUrl, options) {
    options = options || {};
    const url = new URL(appUrl || iframe.getAttribute('src') || './', location.href);
    url.searchParams.set('embed', '1');
    if (!url.searchParams.has('origin') && location.origin !== 'null') url.searchParams.set('origin', location.origin);
    const origin = url.origin;
    const handlers = {};
    const emit = (m) => (handlers[m.event] || []).forEach((f) => f(m));
    let ponged, failed;
    const ready = new Promise((resolve, reject) => { ponged = resolve; failed = reject; });
    // A rejected `ready` is reported as an `error` event; this keeps it from also being an
    // unhandled rejection when the page only listens for events.
    ready.catch(() => {});

    window.addEventListener('message', (ev) => {
      if (ev.source !== iframe.contentWindow || ev.origin !== origin) return;
      if (ev.data === 'PONG') {
        ponged();
        return;
      }
      const m = ev.data && ev.data.rankscope;
      if (m && m.event) emit(m);
    });
    // The frame answers once it can take files; until then a message would be lost.
    const timer = setInterval(() => {
      if (iframe.contentWindow) iframe.contentWindow.postMessage('PING', origin);
    }, options.pingMs || 100);
    // A frame that never answers (the app's server does not let this page frame it, appUrl is
    // not rankscope, or the app does not trust this origin) would otherwise be pinged forever.
    const timeoutMs = options.timeoutMs === undefined ? TIMEOUT_MS : options.timeoutMs;
    const deadline = timeoutMs > 0 && setTimeout(() => {
      clearInterval(timer);
      const message = `the rankscope frame at ${url.origin}${url.pathname} did not answer within ${timeoutMs / 1000} s. ` +
        `Likely causes: its server's Content-Security-Policy frame-ancestors does not list this page's origin ` +
        `(${location.origin}; the browser's console says "Refused to frame"), appUrl is not rankscope, ` +
        `or the app does not trust this origin (its ?origin= parameter)`;
      failed(new Error(message));
      emit({ event: 'error', file: null, message });
    }, timeoutMs);
    ready.then(() => { clearInterval(timer); clearTimeout(deadline); }, () => {});
    iframe.src = url.href;

    const post = (body, transfer) => ready.then(() => iframe.contentWindow.postMessage({ rankscope: body }, origin, transfer || []));
    return {
      /**
       * Resolves once the frame answered PONG; rejects (and an `error` event is emitted) when it
       * did not within `options.timeoutMs` (10 s; 0: wait forever).
       */
      ready,
      /** The app's origin (where every message goes). */
      origin,
      /**
       * Calls `f(message)` on every 'progress', 'analysis', 'comparison', 'selection' or 'error' event (the
       * frame's, and the handshake's time-out: `{event: 'error', file: null, message}`).
       */
      on(event, f) {
        (handlers[event] = handlers[event] || []).push(f);
        return this;
      },
      /**
       * Opens a job: files as {name, buffer: ArrayBuffer} or {name, stream: ReadableStream,
       * size?}; buffers and streams are transferred (they are unusable here afterwards).
       * Resolves once posted; rejects if the handshake timed out.
       */
      open(files, title) {
        const transfer = [];
        for (const f of files) {
          const b = f.stream || (f.buffer && (f.buffer instanceof ArrayBuffer ? f.buffer : f.buffer.buffer));
          if (b && !transfer.includes(b)) transfer.push(b);
        }
        return post(title ? { files, title } : { files }, transfer);
      },
      /**
       * Steers the view: {view, rank?, step?, t0_ns?, t1_ns?} (docs/embedding.md). Resolves once
       * posted; rejects if the handshake timed out.
       */
      show(what) {
        return post({ show: what });
      },
      /**
       * Compares the job with a baseline: {name, buffer: ArrayBuffer}, the bytes of a job digest
       * (`rankscope combine --digest`) or of a saved `rankscope analyze --json` (the buffer is
       * transferred). Each comparison comes as a 'comparison' event: {base, diff, json}, the
       * `rankscope diff --json` of the baseline and the job. Resolves once posted.
       */
      compare(baseline) {
        const b = baseline && baseline.buffer;
        const t = b instanceof ArrayBuffer ? b : b && b.buffer;
        return post({ baseline }, t ? [t] : []);
      },
    };
  }

  globalThis.rankscope = Object.assign(globalThis.rankscope || {}, { embed });
})();
