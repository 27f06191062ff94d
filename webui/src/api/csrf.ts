// CSRF double-submit: the API sets a readable CSRF cookie; unsafe requests echo it in a header.
// The API names it `perigee_csrf`; a plain `csrf` cookie is accepted too (the design's first name).
export const CSRF_COOKIES = ['perigee_csrf', 'csrf'];
export const CSRF_HEADER = 'X-CSRF-Token';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE']);

export function readCookie(name: string, cookieString: string = document.cookie): string | null {
  for (const part of cookieString.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() === name) return decodeURIComponent(part.slice(eq + 1).trim());
  }
  return null;
}

export function csrfToken(): string | null {
  for (const name of CSRF_COOKIES) {
    const v = readCookie(name);
    if (v) return v;
  }
  return null;
}

export function isUnsafeMethod(method: string): boolean {
  return !SAFE_METHODS.has(method.toUpperCase());
}

/** Returns a copy of the request with the CSRF header added when the method changes state. */
export function withCsrf(request: Request): Request {
  if (!isUnsafeMethod(request.method)) return request;
  const token = csrfToken();
  if (!token) return request;
  const headers = new Headers(request.headers);
  headers.set(CSRF_HEADER, token);
  return new Request(request, { headers });
}
