// Logging out forgets the page the user was on: the next sign-in (here a viewer after an admin on the wizard)
// starts at the overview. A session that ends without a logout still returns to its page after the sign-in.
import { fireEvent, screen } from '@testing-library/react';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Route, Routes } from 'react-router-dom';
import { OPERATOR, mockApi } from '../test/fetch-mock';
import { jsonResponse, renderWithProviders } from '../test/render';
import LoginPage from './LoginPage';
import { RequireAuth } from './RequireAuth';
import { useAuth } from './useAuth';

const ADMIN = { ...OPERATOR, id: 1, username: 'admin', role: 'admin' };
const VIEWER = { ...OPERATOR, id: 3, username: 'vera', role: 'viewer' };

function LogoutButton() {
  const { logout } = useAuth();
  return <button onClick={() => void logout()}>Log out</button>;
}

function app() {
  const page = (name: string) => (
    <RequireAuth>
      <p>{name}</p>
      <LogoutButton />
    </RequireAuth>
  );
  return (
    <Routes>
      <Route path="/login" element={<LoginPage />} />
      <Route path="/" element={page('overview page')} />
      <Route path="/setup" element={page('wizard page')} />
    </Routes>
  );
}

function serve(first: object, next: object) {
  let me: object | null = first;
  return mockApi({
    'GET /api/v1/auth/csrf': () => jsonResponse({ ok: true }),
    'GET /api/v1/auth/me': () => (me ? jsonResponse(me) : jsonResponse({ error: { code: 'unauthenticated', message: 'sign in' } }, 401)),
    'POST /api/v1/auth/logout': () => {
      me = null;
      return jsonResponse({ ok: true });
    },
    'POST /api/v1/auth/login': () => {
      me = next;
      return jsonResponse({ user: next });
    },
  });
}

async function signIn() {
  fireEvent.change(await screen.findByLabelText(/^Password/), { target: { value: 'a-password-long-enough' } });
  fireEvent.click(screen.getByRole('button', { name: 'Sign in' }));
}

describe('logging out', () => {
  afterEach(() => vi.unstubAllGlobals());

  it('sends the next user to the overview, not to the page the one who left was on', async () => {
    serve(ADMIN, VIEWER);
    renderWithProviders(app(), { route: '/setup' });
    fireEvent.click(await screen.findByRole('button', { name: 'Log out' }));
    await signIn();
    expect(await screen.findByText('overview page')).toBeInTheDocument();
    expect(screen.queryByText('wizard page')).not.toBeInTheDocument();
  });

  it('keeps the return page of a session that ended without a logout', async () => {
    const calls = serve(ADMIN, ADMIN);
    const { queryClient } = renderWithProviders(app(), { route: '/setup' });
    await screen.findByText('wizard page');
    queryClient.setQueryData(['auth', 'me'], null);
    await signIn();
    expect(await screen.findByText('wizard page')).toBeInTheDocument();
    expect(calls.some((c) => c.path === '/api/v1/auth/logout')).toBe(false);
  });
});
