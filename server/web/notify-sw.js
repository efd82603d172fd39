// The waiting page's service worker: it shows the "your turn" push notice
// and opens its return link when the notice is clicked.
self.addEventListener("push", (event) => {
  let msg = {};
  try { msg = event.data ? event.data.json() : {}; } catch (e) { msg = {}; }
  event.waitUntil(self.registration.showNotification(msg.title || "", {
    body: msg.body || "", lang: msg.lang || "", data: { url: msg.url || "/" },
    requireInteraction: true, tag: "waitroom-turn",
  }));
});
self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  const url = new URL(event.notification.data.url, self.location.origin);
  if (url.origin !== self.location.origin) return;
  event.waitUntil(self.clients.openWindow(url.href));
});
