import { screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { mockApi } from '../test/fetch-mock';
import { jsonResponse, renderWithProviders } from '../test/render';
import BodPage from './BodPage';

const derived = (value: number, unit: string) => ({ value, computed: value, unit, derivation: 'x', overridden: false });

const DERIVE = {
  values: {
    sndbuf_bytes: derived(4_000_000, 'bytes'),
    rcvbuf_bytes: derived(4_000_000, 'bytes'),
    pacing_rate_bps: derived(20_000_000, 'bit/s'),
    initcwnd: derived(10, 'segments'),
    initrwnd: derived(10, 'segments'),
    hybla_base_rtt_ms: derived(600, 'ms'),
    hybla_cwnd_max: derived(2000, 'segments'),
  },
  warnings: [],
};

function profileOut(id: number, name: string) {
  return { id, name, inputs: { forward_rate_bps: 20_000_000, return_cra_bps: 1_000_000, return_rbdc_max_bps: 4_000_000, superframe_ms: 26.5, allocation_delay_ms: 250, base_rtt_ms: 600, terminal_buffer_bytes: 262_144, mss_bytes: 1448, role: 'hub' }, overrides: {}, tuning: {}, created_at: 0, updated_at: 0 };
}

/** A stateful fake of the BoD endpoints: profiles created by POST show up in the next GET. */
function bodApi(initial: ReturnType<typeof profileOut>[]) {
  const profiles = [...initial];
  return mockApi({
    'GET /api/v1/bod/profiles': () => jsonResponse(profiles),
    'POST /api/v1/bod/derive': () => jsonResponse(DERIVE),
    'GET /api/v1/config': () => jsonResponse({ version_id: 1, config: { satellite: { pacing_rate_bps: 0 }, hybla: { base_rtt_ms: 25, cwnd_max: 1000 } } }),
    'GET /api/v1/versions': () => jsonResponse({ versions: [], total: 1, active_version_id: 1, latest_version_id: 1 }),
    'POST /api/v1/bod/profiles': (_req, body) => {
      const p = profileOut(42, (body as { name: string }).name);
      profiles.push(p);
      return jsonResponse(p, 201);
    },
    'PUT /api/v1/bod/profiles/5': () => jsonResponse(profiles[0]),
    'POST /api/v1/bod/profiles/42/apply-to-config': () => jsonResponse({ version_id: 7, profile_id: 42 }),
    'POST /api/v1/bod/profiles/5/apply-to-config': () => jsonResponse({ version_id: 8, profile_id: 5 }),
  });
}

describe('BodPage', () => {
  afterEach(() => vi.unstubAllGlobals());

  it('confirms the written config version for a NEW profile, after it becomes the selected one', async () => {
    const calls = bodApi([]);
    const user = userEvent.setup();
    renderWithProviders(<BodPage />);
    const name = await screen.findByLabelText(/^Profile name/);
    await user.clear(name);
    await user.type(name, 'geo');
    await user.click(screen.getByRole('button', { name: 'Save and write to config' }));

    expect(await screen.findByText(/Written into config version 7/)).toBeInTheDocument();
    // The editor now shows the saved profile (the selection moved to it), and the message is still there.
    await waitFor(() => expect(screen.getByRole('textbox', { name: 'Profile' })).toHaveValue('geo'));
    expect(screen.getByText(/Written into config version 7/)).toBeInTheDocument();
    expect(calls.filter((c) => c.method === 'POST' && c.path === '/api/v1/bod/profiles/42/apply-to-config')).toHaveLength(1);
  });

  it('confirms the written config version for an existing profile', async () => {
    bodApi([profileOut(5, 'leo')]);
    const user = userEvent.setup();
    renderWithProviders(<BodPage />);
    await user.click(await screen.findByRole('button', { name: 'Save and write to config' }));
    expect(await screen.findByText(/Written into config version 8/)).toBeInTheDocument();
  });

  it('shows hybla.cwnd_max among the config changes and lets it be overridden', async () => {
    bodApi([profileOut(5, 'leo')]);
    renderWithProviders(<BodPage />);
    const table = await screen.findByRole('table', { name: 'Config changes from this profile' });
    const row = within(table).getByText('hybla.cwnd_max').closest('tr') as HTMLElement;
    expect(within(row).getByText('1000')).toBeInTheDocument();
    expect(within(row).getByText(/2000/)).toBeInTheDocument();
    expect(screen.getByLabelText('hybla_cwnd_max')).toBeInTheDocument();
  });
});
