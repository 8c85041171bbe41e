// The JSON API of docs/protocol.md, "The JSON API", with the session cookie and the CSRF token.

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function csrfToken() {
  const meta = document.querySelector('meta[name="csrf-token"]');
  if (meta && meta.content) return meta.content;
  const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
  return match ? decodeURIComponent(match[1]) : "";
}

async function request(method, path, { body, raw, signal } = {}) {
  const headers = { Accept: "application/json" };
  if (body !== undefined || raw !== undefined) headers["Content-Type"] = "application/json";
  if (method !== "GET") headers["X-CSRFToken"] = csrfToken();
  const response = await fetch(path, {
    method,
    headers,
    body: raw !== undefined ? raw : body === undefined ? undefined : JSON.stringify(body),
    credentials: "same-origin",
    signal,
  });
  // A lapsed session: the API answers 401/403 or sends us to the login page.
  if (response.status === 401 || (response.redirected && response.url.includes("/accounts/login/"))) {
    window.location.assign(`/accounts/login/?next=${encodeURIComponent(window.location.pathname + window.location.search)}`);
    throw new ApiError(401, "not signed in");
  }
  if (!response.ok) {
    let message = response.statusText;
    try {
      const data = await response.json();
      message = data.message || data.detail || data.error || message;
    } catch {
      // not JSON
    }
    throw new ApiError(response.status, String(message));
  }
  if (response.status === 204) return null;
  return response.json();
}

/** Uploads one file into a conversation's workspace with XMLHttpRequest (fetch reports no upload
 * progress): resolves to {path, size, textPath?}; onProgress(fraction) while it goes. */
function uploadFile(id, file, onProgress, signal) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", `/api/conversations/${id}/files/`);
    xhr.setRequestHeader("X-CSRFToken", csrfToken());
    xhr.setRequestHeader("Accept", "application/json");
    xhr.responseType = "json";
    xhr.upload.addEventListener("progress", (event) => {
      if (event.lengthComputable && onProgress) onProgress(event.loaded / event.total);
    });
    xhr.addEventListener("load", () => {
      const data = xhr.response || {};
      if (xhr.status === 201) resolve(data);
      else reject(new ApiError(xhr.status, String(data.message || xhr.statusText || xhr.status)));
    });
    xhr.addEventListener("error", () => reject(new ApiError(0, "the connection failed")));
    xhr.addEventListener("abort", () => reject(new ApiError(0, "cancelled")));
    if (signal) signal.addEventListener("abort", () => xhr.abort());
    const body = new FormData();
    body.append("file", file);
    xhr.send(body);
  });
}

/** Whether the browser is still signed in after a socket's session ended (conversation.js). The
 * server closes the socket the moment the password is saved, before the response that carries
 * the new session cookie has reached the browser: ask a few times. A plain fetch, as request()
 * would go to the login page at the first 401. False once `signal` aborts. */
async function stillSignedIn(id, signal) {
  for (const delayMs of [300, 1000, 2000]) {
    await new Promise((resolve) => setTimeout(resolve, delayMs));
    if (signal.aborted) return false;
    try {
      const response = await fetch(`/api/conversations/${id}/`, {
        headers: { Accept: "application/json" },
        credentials: "same-origin",
      });
      if (response.status !== 401 && !response.redirected) return true;
    } catch {
      // offline for a moment: ask again
    }
  }
  return false;
}

/** A file path as URL path segments (each encoded, the slashes kept). */
const pathUrl = (path) => path.split("/").map(encodeURIComponent).join("/");

export const api = {
  /** One page of the list, pinned first, newest first: {conversations, next}; `before` is the previous
   * page's `next`; with a `query`, only the conversations that match it, each with a `snippet`;
   * `archived`: the archived ones alone (the list leaves them out). */
  conversationPage: (before, signal, query = "", archived = false) => {
    const params = new URLSearchParams();
    if (query) params.set("q", query);
    if (before) params.set("before", before);
    if (archived) params.set("archived", "1");
    const search = params.toString();
    return request("GET", `/api/conversations/${search ? `?${search}` : ""}`, { signal });
  },
  /** The text of a JSON export: a new conversation of this user; of an export of all: as many,
   * {conversations: [...]} (docs/protocol.md, "Export and import"). */
  importConversation: (text) => request("POST", "/api/conversations/import/", { raw: text }),
  /** Deletes the account: {password} or {username} (docs/protocol.md, "Accounts and HTTP"). */
  deleteAccount: (body) => request("POST", "/api/account/delete/", { body }),
  /** The user's own tokens today and this month (UTC): {today, month, models, dailyTokenQuota}. */
  usage: () => request("GET", "/api/usage/"),
  notifications: (limit) => request("GET", `/api/notifications/?limit=${limit}`),
  readNotifications: (body) => request("POST", "/api/notifications/read/", { body }),
  exportUrl: (id, format) => `/api/conversations/${id}/export/?format=${format}`,
  createConversation: (title, agent) =>
    request("POST", "/api/conversations/", { body: { ...(title ? { title } : {}), ...(agent ? { agent } : {}) } }),
  /** The agents this user may pick: [{slug, name, description, model}], the default first. */
  agents: () => request("GET", "/api/agents/"),
  setAgent: (id, agent) => request("PATCH", `/api/conversations/${id}/`, { body: { agent } }),
  getConversation: (id, signal) => request("GET", `/api/conversations/${id}/`, { signal }),
  stillSignedIn,
  /** Keeps the version the user chose to view (a user_message's seq; null: the newest) for
   * their next load, on any device. */
  viewVersion: (id, seq) => request("PATCH", `/api/conversations/${id}/`, { body: { viewed_seq: seq } }),
  renameConversation: (id, title) => request("PATCH", `/api/conversations/${id}/`, { body: { title } }),
  /** Pins or archives it (or undoes it): `changes` is {pinned?, archived?}. */
  organizeConversation: (id, changes) => request("PATCH", `/api/conversations/${id}/`, { body: changes }),
  deleteConversation: (id) => request("DELETE", `/api/conversations/${id}/`),
  /** The messages waiting for the conversation's run to end: {queue: [{queueId, content, attachments}], steers}. */
  queue: (id, signal) => request("GET", `/api/conversations/${id}/queue/`, { signal }),
  events: (id, after, signal) =>
    request("GET", `/api/conversations/${id}/events/?after=${after}`, { signal }).then((d) => d.events || []),
  /** The ratings given in a conversation: [{runId, rating, comment, updatedAt}]. */
  feedback: (id, signal) =>
    request("GET", `/api/conversations/${id}/feedback/`, { signal }).then((d) => d.feedback || []),
  rateRun: (runId, body) => request("POST", `/api/runs/${runId}/feedback/`, { body }),
  /** The files of a conversation's workspace: [{path, size, modified}]. */
  files: (id) => request("GET", `/api/conversations/${id}/files/`).then((d) => d.files || []),
  uploadFile,
  fileUrl: (id, path) => `/api/conversations/${id}/files/${pathUrl(path)}`,
  /** Shared links (docs/protocol.md, "Shared links"): [{id, hint, createdAt, expiresAt, active}]. */
  shares: (id) => request("GET", `/api/conversations/${id}/shares/`).then((d) => d.shares || []),
  /** A link to the branch ending at `leafSeq` (the one in view; null: the server's choice). */
  createShare: (id, expiresInDays, leafSeq) =>
    request("POST", `/api/conversations/${id}/shares/`, {
      body: { ...(expiresInDays ? { expiresInDays } : {}), ...(Number.isInteger(leafSeq) ? { leafSeq } : {}) },
    }),
  revokeShare: (shareId) => request("DELETE", `/api/shares/${shareId}/`),
  /** A small copy of an image file, re-encoded by the server (docs/protocol.md, "Images"). */
  thumbnailUrl: (id, path) => `/api/conversations/${id}/files/${pathUrl(path)}?thumbnail=1`,
  deleteFile: (id, path) => request("DELETE", `/api/conversations/${id}/files/${pathUrl(path)}`),
};
