import createClient, { type Middleware } from 'openapi-fetch';
import type { paths } from './schema.gen';
import { withCsrf } from './csrf';
import { ApiError, parseApiError } from './errors';
import { emitSessionSignal } from './session-events';

const csrfMiddleware: Middleware = {
  onRequest({ request }) {
    return withCsrf(request);
  },
  async onResponse({ response }) {
    if (response.status === 401) emitSessionSignal('unauthenticated');
    if (response.status === 403) {
      const body: unknown = await response.clone().json().catch(() => null);
      if (parseApiError(403, body).code === 'password_change_required') emitSessionSignal('password_change_required');
    }
    return response;
  },
};

function baseUrl(): string {
  return typeof window !== 'undefined' ? window.location.origin : 'http://localhost';
}

export const api = createClient<paths>({
  baseUrl: baseUrl(),
  credentials: 'same-origin',
  // Read fetch at call time so tests (and polyfills) can replace it.
  fetch: (input: Request) => globalThis.fetch(input),
});
api.use(csrfMiddleware);

interface FetchResult {
  data?: unknown;
  error?: unknown;
  response: Response;
}

/** Awaits an openapi-fetch call and returns its data, throwing ApiError on any non-2xx answer. */
export async function unwrap<R extends FetchResult>(call: Promise<R>): Promise<NonNullable<R['data']>> {
  let result: R;
  try {
    result = await call;
  } catch (e) {
    throw new ApiError(0, 'network_error', e instanceof Error ? `Network error: ${e.message}` : 'Network error');
  }
  if (!result.response.ok) throw parseApiError(result.response.status, result.error);
  return result.data as NonNullable<R['data']>;
}
