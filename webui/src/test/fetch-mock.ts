import { vi } from 'vitest';
import { jsonResponse } from './render';

export type Handler = (req: Request, body: unknown) => Response | Promise<Response>;

/** The signed-in user the pages see unless a test routes `GET /api/v1/auth/me` itself. */
export const OPERATOR = { id: 2, username: 'otto', role: 'operator', must_change_password: false, disabled: false, created_at: 0 };

/** Routes fetch calls by "METHOD /path" to handlers; records every request with its JSON body. */
export function mockApi(given: Record<string, Handler>) {
  const routes: Record<string, Handler> = { 'GET /api/v1/auth/me': () => jsonResponse(OPERATOR), ...given };
  const calls: { method: string; path: string; body: unknown; headers: Headers }[] = [];
  vi.stubGlobal(
    'fetch',
    vi.fn(async (req: Request) => {
      const url = new URL(req.url);
      const text = req.method === 'GET' ? '' : await req.clone().text();
      const body = text ? JSON.parse(text) : undefined;
      calls.push({ method: req.method, path: url.pathname, body, headers: req.headers });
      const handler = routes[`${req.method} ${url.pathname}`];
      if (!handler) return jsonResponse({ error: { code: 'not_found', message: `no mock for ${req.method} ${url.pathname}` } }, 404);
      return handler(req, body);
    }),
  );
  return calls;
}
