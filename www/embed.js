// rankscope's embedding helper for host pages (docs/embedding.md). A classic script, no
// dependencies: <script src="https://your.host/tools/rankscope/embed.js"></script>, then
//
//   const rs = rankscope.embed(document.querySelector('iframe'), 'https://your.host/tools/rankscope/');
//   rs.on('analysis', ({ report }) => console.log(report.findings));
//   rs.open([{ name: 'rank0.json', buffer }], 'job 42');   // ArrayBuffers are transferred
//   rs.show({ view: 'timeline', rank: 3, step: 12 });
//
// It points the iframe at the app with ?embed=1&origin=<this page's origin> (so the frame trusts
// this page and no other), sends 'PING' until the frame answers 'PONG', and addresses every
// message to the app's origin only. Traces go from this page to the frame and nowhere else.
(function () {
  'use strict';

  function embed(iframe, appUrl, options) {
    options = options || {};
    const url = new URL(appUrl || iframe.getAttribute('src') || './', location.href);
    url.searchParams.set('embed', '1');
    if (!url.searchParams.has('origin') && location.origin !== 'null') url.searchParams.set('origin', location.origin);
    const origin = url.origin;
    const handlers = {};
    let ponged;
    const ready = new Promise((resolve) => { ponged = resolve; });

    window.addEventListener('message', (ev) => {
      if (ev.source !== iframe.contentWindow || ev.origin !== origin) return;
      if (ev.data === 'PONG') {
        ponged();
        return;
      }
      const m = ev.data && ev.data.rankscope;
      if (m && m.event) (handlers[m.event] || []).forEach((f) => f(m));
    });
    // The frame answers once it can take files; until then a message would be lost.
    const timer = setInterval(() => {
      if (iframe.contentWindow) iframe.contentWindow.postMessage('PING', origin);
    }, options.pingMs || 100);
    ready.then(() => clearInterval(timer));
    iframe.src = url.href;

    const post = (body, transfer) => ready.then(() => iframe.contentWindow.postMessage({ rankscope: body }, origin, transfer || []));
    return {
      /** Resolves once the frame answered PONG. */
      ready,
      /** The app's origin (where every message goes). */
      origin,
      /** Calls `f(message)` on every 'progress', 'analysis', 'selection' or 'error' event. */
      on(event, f) {
        (handlers[event] = handlers[event] || []).push(f);
        return this;
      },
      /**
       * Opens a job: files as {name, buffer: ArrayBuffer} or {name, stream: ReadableStream,
       * size?}; buffers and streams are transferred (they are unusable here afterwards).
       */
      open(files, title) {
        const transfer = [];
        for (const f of files) {
          const b = f.stream || (f.buffer && (f.buffer instanceof ArrayBuffer ? f.buffer : f.buffer.buffer));
          if (b && !transfer.includes(b)) transfer.push(b);
        }
        return post(title ? { files, title } : { files }, transfer);
      },
      /** Steers the view: {view, rank?, step?, t0_ns?, t1_ns?} (docs/embedding.md). */
      show(what) {
        return post({ show: what });
      },
    };
  }

  globalThis.rankscope = Object.assign(globalThis.rankscope || {}, { embed });
})();
