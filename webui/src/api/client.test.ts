import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { jsonResponse } from '../test/render';
import { ApiError } from './errors';
import { endpoints } from './endpoints';
import { onSessionSignal } from './session-events';

describe('API client', () => {
  let requests: Request[];
  let answer: () => Response;

  beforeEach(() => {
    requests = [];
    answer = () => jsonResponse({ username: 'admin', role: 'admin', must_change_password: false });
    vi.stubGlobal('fetch', vi.fn(async (req: Request) => {
      requests.push(req);
      return answer();
    }));
    document.cookie = 'perigee_csrf=tok%2Fen-123; path=/';
  });
  afterEach(() => {
    vi.unstubAllGlobals();
    document.cookie = 'perigee_csrf=; expires=Thu, 01 Jan 1970 00:00:00 GMT; path=/';
  });

  it('sends the CSRF cookie back as X-CSRF-Token on unsafe methods only', async () => {
    await endpoints.me();
    answer = () => jsonResponse({ ok: true });
    await endpoints.logout();
    expect(requests).toHaveLength(2);
    expect(requests[0].method).toBe('GET');
    expect(requests[0].headers.get('X-CSRF-Token')).toBeNull();
    expect(requests[1].method).toBe('POST');
    expect(requests[1].headers.get('X-CSRF-Token')).toBe('tok/en-123');
    expect(new URL(requests[1].url).pathname).toBe('/api/v1/auth/logout');
  });

  it('turns a 422 answer into field errors', async () => {
    answer = () =>
      jsonResponse(
        { detail: [{ loc: ['body', 'new_password'], msg: 'String should have at least 12 characters', type: 'string_too_short' }] },
        422,
      );
    const err = await endpoints.changePassword('a', 'b').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(422);
    expect((err as ApiError).fieldErrors).toEqual({ new_password: 'String should have at least 12 characters' });
  });

  it('signals a forced password change on 403 password_change_required', async () => {
    const signals: string[] = [];
    const off = onSessionSignal((s) => signals.push(s));
    answer = () => jsonResponse({ error: { code: 'password_change_required', message: 'Change your password first', field: null } }, 403);
    const err = await endpoints.me().catch((e: unknown) => e);
    off();
    expect((err as ApiError).code).toBe('password_change_required');
    expect(signals).toEqual(['password_change_required']);
  });
});
