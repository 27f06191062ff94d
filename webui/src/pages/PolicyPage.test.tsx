import { screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { mockApi } from '../test/fetch-mock';
import { jsonResponse, renderWithProviders } from '../test/render';
import PolicyPage from './PolicyPage';

const base = {
  'GET /api/v1/policy/classes': () => jsonResponse({ classes: [], issues: [], version_id: 1 }),
  'GET /api/v1/versions': () => jsonResponse({ versions: [], total: 1, active_version_id: 1, latest_version_id: 1 }),
};

async function openNewClass(user: ReturnType<typeof userEvent.setup>) {
  await user.click(await screen.findByRole('button', { name: 'Add class' }));
  const dialog = await screen.findByRole('dialog');
  await user.type(within(dialog).getByLabelText(/^Name/), 'web');
  await user.type(within(dialog).getByLabelText('Destination ports'), '80{enter}');
  return dialog;
}

describe('PolicyPage', () => {
  afterEach(() => vi.unstubAllGlobals());

  it('shows the API 422 validation errors under the fields they concern', async () => {
    const calls = mockApi({
      ...base,
      'POST /api/v1/policy/classes': () =>
        jsonResponse(
          {
            error: {
              code: 'validation_error',
              message: 'body.match.dports.0: port 80 is reserved for the cache',
              field: 'body.match.dports.0',
              details: [
                { field: 'body.match.dports.0', message: 'port 80 is reserved for the cache', type: 'value_error' },
                { field: 'body.priority', message: 'priority taken', type: 'value_error' },
              ],
            },
          },
          422,
        ),
    });
    const user = userEvent.setup();
    renderWithProviders(<PolicyPage />);
    expect(await screen.findByText('No traffic classes')).toBeInTheDocument();
    const dialog = await openNewClass(user);
    await user.click(within(dialog).getByRole('button', { name: 'Review changes' }));

    const ports = within(dialog).getByLabelText('Destination ports');
    await waitFor(() => expect(ports).toHaveAttribute('aria-invalid', 'true'));
    expect(within(dialog).getAllByText('port 80 is reserved for the cache').length).toBeGreaterThan(0);
    expect(within(dialog).getByLabelText('Priority')).toHaveAttribute('aria-invalid', 'true');
    expect(within(dialog).getByText('priority taken')).toBeInTheDocument();

    const post = calls.find((c) => c.method === 'POST');
    expect(post?.body).toMatchObject({ name: 'web', action: 'accelerate', match: { dports: ['80'], protocol: 'tcp' } });
  });

  it('lists policy conflicts returned by the API', async () => {
    mockApi({
      ...base,
      'POST /api/v1/policy/classes': () =>
        jsonResponse(
          {
            error: {
              code: 'contradiction',
              message: "classes 'web' and 'bulk' overlap at priority 100 with different actions",
              field: 'classes',
              details: { issues: [{ severity: 'error', code: 'contradiction', message: "'web' and 'bulk' contradict", classes: ['web', 'bulk'] }] },
            },
          },
          422,
        ),
    });
    const user = userEvent.setup();
    renderWithProviders(<PolicyPage />);
    const dialog = await openNewClass(user);
    await user.click(within(dialog).getByRole('button', { name: 'Review changes' }));
    expect(await within(dialog).findByText(/'web' and 'bulk' contradict/)).toBeInTheDocument();
    expect(within(dialog).getByText(/overlap at priority 100/)).toBeInTheDocument();
  });

  it("catches a port the gateway's schema refuses before asking the API", async () => {
    const calls = mockApi(base);
    const user = userEvent.setup();
    renderWithProviders(<PolicyPage />);
    await user.click(await screen.findByRole('button', { name: 'Add class' }));
    const dialog = await screen.findByRole('dialog');
    await user.type(within(dialog).getByLabelText(/^Name/), 'bulk');
    await user.type(within(dialog).getByLabelText('Destination ports'), '70000{enter}');
    await user.click(within(dialog).getByRole('button', { name: 'Review changes' }));
    expect(await within(dialog).findByText(/'70000' is not valid: A port/)).toBeInTheDocument();
    expect(calls.some((c) => c.method === 'POST')).toBe(false);
  });
});
