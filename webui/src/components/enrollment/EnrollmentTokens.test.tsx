import { screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { mockApi } from '../../test/fetch-mock';
import { jsonResponse, renderWithProviders } from '../../test/render';
import { EnrollmentTokens } from './EnrollmentTokens';

const PIN = `sha256:${'d'.repeat(64)}`;
const TOKEN = 'pgt1.secret-token-value';

const token = (over: Record<string, unknown>) => ({
  id: 1,
  name: 'alpha',
  prefixes: ['10.71.1.0/24'],
  comment: '',
  created_at: 1_800_000_000,
  created_by: 'otto',
  expires_at: 1_800_086_400,
  state: 'live',
  used_at: null,
  used_fingerprint: null,
  used_version_id: null,
  revoked_at: null,
  revoked_by: null,
  ...over,
});

describe('EnrollmentTokens', () => {
  afterEach(() => vi.unstubAllGlobals());

  it('lists the tokens with their state; a viewer gets no form and no revoke button', async () => {
    mockApi({
      'GET /api/v1/peer/enrollment-tokens': () =>
        jsonResponse({ tokens: [token({}), token({ id: 2, name: 'bravo', state: 'used', used_at: 1_800_000_100, used_fingerprint: `sha256:${'a'.repeat(64)}`, used_version_id: 9 }), token({ id: 3, name: 'charlie', state: 'expired' })] }),
    });
    renderWithProviders(<EnrollmentTokens canEdit={false} hubPin={null} />);
    const table = await screen.findByRole('table', { name: 'Enrollment tokens' });
    const rows = within(table).getAllByRole('row').slice(1);
    expect(rows[0]).toHaveTextContent('alpha');
    expect(rows[0]).toHaveTextContent('live');
    expect(rows[1]).toHaveTextContent('used');
    expect(rows[1]).toHaveTextContent('version 9');
    expect(rows[2]).toHaveTextContent('expired');
    expect(screen.queryByRole('form', { name: 'Create an enrollment token' })).not.toBeInTheDocument();
    expect(screen.queryByRole('button', { name: /^Revoke/ })).not.toBeInTheDocument();
  });

  it("creates a token: the API's refusal is shown and nothing is made; then the token is shown once with the join file", async () => {
    const calls = mockApi({
      'GET /api/v1/peer/enrollment-tokens': () => jsonResponse({ tokens: [] }),
      'POST /api/v1/peer/enrollment-tokens': (_req, body) =>
        (body as { name: string }).name === 'alpha'
          ? jsonResponse({ error: { code: 'terminal_exists', message: "terminal 'alpha' is enrolled already", field: 'name' } }, 409)
          : jsonResponse({ ...token({ id: 5, name: 'bravo', prefixes: ['10.72.1.0/24'], comment: 'site B' }), token: TOKEN }, 201),
    });
    const user = userEvent.setup();
    renderWithProviders(<EnrollmentTokens canEdit hubPin={null} />);
    const form = await screen.findByRole('form', { name: 'Create an enrollment token' });
    await user.click(within(form).getByRole('button', { name: 'Create token' }));
    expect(await within(form).findByText(/At least one of the site's prefixes/)).toBeInTheDocument();
    expect(calls.filter((c) => c.method === 'POST')).toHaveLength(0);

    await user.type(within(form).getByLabelText(/^Terminal name/), 'alpha');
    await user.type(within(form).getByLabelText(/^Site prefixes/), '10.72.1.0/24');
    await user.click(within(form).getByRole('button', { name: 'Create token' }));
    expect(await within(form).findByText("terminal 'alpha' is enrolled already")).toBeInTheDocument();
    expect(screen.queryByRole('status', { name: /^Enrollment token for / })).not.toBeInTheDocument();

    await user.clear(within(form).getByLabelText(/^Terminal name/));
    await user.type(within(form).getByLabelText(/^Terminal name/), 'bravo');
    await user.type(within(form).getByLabelText(/^Comment/), 'site B');
    await user.click(within(form).getByRole('button', { name: 'Create token' }));
    const panel = await screen.findByRole('status', { name: /^Enrollment token for .* created/ });
    expect(calls.filter((c) => c.method === 'POST')[1].body).toEqual({ name: 'bravo', prefixes: ['10.72.1.0/24'], expires_in_s: 86400, comment: 'site B' });
    expect(within(panel).getByLabelText('Enrollment token')).toHaveTextContent(TOKEN);
    expect(within(panel).getByRole('button', { name: 'Copy enrollment token' })).toBeInTheDocument();
    // The join file needs the hub's address and pin first.
    expect(within(panel).queryByLabelText('Join file')).not.toBeInTheDocument();
    await user.type(within(panel).getByLabelText('Hub URL'), 'https://hub.example.net:8443');
    await user.type(within(panel).getByLabelText('Hub pin'), 'sha256:nothex');
    expect(within(panel).getByText(/64 lowercase hex digits/)).toBeInTheDocument();
    await user.clear(within(panel).getByLabelText('Hub pin'));
    await user.type(within(panel).getByLabelText('Hub pin'), PIN);
    const file = within(panel).getByLabelText('Join file');
    expect(JSON.parse(file.textContent ?? '')).toEqual({ hub_url: 'https://hub.example.net:8443', hub_pin: PIN, token: TOKEN });
    expect(within(panel).getByLabelText('Commands on the terminal')).toHaveTextContent('PERIGEE_JOIN_FILE=/var/lib/perigee/join.json');

    await user.click(within(panel).getByRole('button', { name: 'Dismiss the new token' }));
    await waitFor(() => expect(screen.queryByText(TOKEN)).not.toBeInTheDocument());
  });

  it('fills in the hub pin when it is known', async () => {
    mockApi({
      'GET /api/v1/peer/enrollment-tokens': () => jsonResponse({ tokens: [] }),
      'POST /api/v1/peer/enrollment-tokens': () => jsonResponse({ ...token({ id: 6 }), token: TOKEN }, 201),
    });
    const user = userEvent.setup();
    renderWithProviders(<EnrollmentTokens canEdit hubPin={PIN} />);
    const form = await screen.findByRole('form', { name: 'Create an enrollment token' });
    await user.type(within(form).getByLabelText(/^Terminal name/), 'alpha');
    await user.type(within(form).getByLabelText(/^Site prefixes/), '10.71.1.0/24');
    await user.click(within(form).getByRole('button', { name: 'Create token' }));
    const panel = await screen.findByRole('status', { name: /^Enrollment token for .* created/ });
    expect(within(panel).getByLabelText('Hub pin')).toHaveValue(PIN);
  });

  it('revokes a live token after a confirmation', async () => {
    const calls = mockApi({
      'GET /api/v1/peer/enrollment-tokens': () => jsonResponse({ tokens: [token({}), token({ id: 2, name: 'bravo', state: 'used' })] }),
      'DELETE /api/v1/peer/enrollment-tokens/1': () => jsonResponse(token({ state: 'revoked', revoked_at: 1_800_000_500, revoked_by: 'otto' })),
    });
    vi.spyOn(window, 'confirm').mockReturnValue(true);
    const user = userEvent.setup();
    renderWithProviders(<EnrollmentTokens canEdit hubPin={null} />);
    await user.click(await screen.findByRole('button', { name: 'Revoke the token for alpha' }));
    await waitFor(() => expect(calls.filter((c) => c.method === 'DELETE')).toHaveLength(1));
    // A used token is not revoked here (its terminal is).
    expect(screen.queryByRole('button', { name: 'Revoke the token for bravo' })).not.toBeInTheDocument();
  });
});
