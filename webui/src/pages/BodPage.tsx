import { Alert, Badge, Box, Button, Grid, Group, List, Modal, NumberInput, Paper, SegmentedControl, Select, Stack, Table, Text, TextInput, Title } from '@mantine/core';
import { useDebouncedValue } from '@mantine/hooks';
import { keepPreviousData, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { endpoints, type BodInputs, type BodProfileIn, type BodProfileOut, type Derived } from '../api/endpoints';
import { apiExamples } from '../api/examples.gen';
import { ApiError, errorMessage, type FieldErrors } from '../api/errors';
import { afterConfigChange, keys } from '../api/keys';
import { PageHeader } from '../components/PageHeader';
import { EditOutcomeAlert, PendingVersionsNote, type EditOutcome } from '../components/RunningEdit';
import { ScrollTable } from '../components/ScrollTable';
import { QueryView } from '../components/StateViews';
import { errorFor } from '../lib/field-errors';
import { formatBps, formatBytes } from '../lib/format';
import { def } from '../lib/schema-check';
import { choices } from '../lib/system-config';
import { useCan } from '../auth/roles';

/** Where a new profile starts: the API model's published example (its link, every other input at its default). */
const STARTING_INPUTS = apiExamples.BodInputs;

const INPUT_FIELDS: { key: keyof BodInputs; label: string; unit: string; step?: number }[] = [
  { key: 'forward_rate_bps', label: 'Forward rate', unit: 'bit/s' },
  { key: 'return_cra_bps', label: 'Return CRA', unit: 'bit/s' },
  { key: 'return_rbdc_max_bps', label: 'Return RBDC max', unit: 'bit/s' },
  { key: 'superframe_ms', label: 'Superframe', unit: 'ms', step: 0.5 },
  { key: 'allocation_delay_ms', label: 'Allocation delay', unit: 'ms' },
  { key: 'base_rtt_ms', label: 'Base RTT', unit: 'ms' },
  { key: 'terminal_buffer_bytes', label: 'Terminal buffer', unit: 'bytes' },
  { key: 'mss_bytes', label: 'MSS', unit: 'bytes' },
  { key: 'modem_overhead_bytes', label: 'Modem framing per packet (0 = unknown)', unit: 'bytes' },
];


type Values = Record<string, Derived>;
type BodRole = NonNullable<BodInputs['role']>;
/** Which way each role (the gateway schema's) sends over the satellite. */
const ROLE_SENDS: Record<BodRole, string> = { hub: 'sends forward', terminal: 'sends return' };

/** Bounds the gateway's schema gives the config fields these inputs end up in (the API refuses more). */
const INPUT_MAX: Partial<Record<keyof BodInputs, number | undefined>> = {
  forward_rate_bps: def('Satellite').properties?.forward_rate_bps?.maximum,
  return_cra_bps: def('Satellite').properties?.return_rate_bps?.maximum,
  return_rbdc_max_bps: def('Satellite').properties?.return_rate_bps?.maximum,
  base_rtt_ms: def('Hybla').properties?.base_rtt_ms?.maximum,
  modem_overhead_bytes: def('Shaping').properties?.overhead_bytes?.maximum,
};

/** A config value as the change table shows it. */
const shown = (v: unknown) => (v === null || v === undefined ? '—' : typeof v === 'object' ? JSON.stringify(v) : String(v));

/** Why the shaper sits where it does, for the role this gateway plays (tuning.py has the formula). */
function shapingExplanation(role: BodRole): string {
  const common =
    'Shaping caps the sum of every flow leaving the satellite interface (pacing caps each flow alone), so the many connections of a busy gateway cannot overflow the modem queue together: the queue builds in the gateway instead. ';
  if (role === 'hub') return `${common}A hub sends forward, and the forward carrier is not on demand: the shaper runs at the forward rate.`;
  return (
    `${common}A terminal sends on the BoD return link, whose grant moves between CRA and CRA + RBDC max. The shaper runs at the top of the grant: ` +
    'when the grant is at its top the queue stays in the gateway, and below it the excess waits in the modem buffer, which is what makes the modem request more. ' +
    'Shaping at CRA would never let the modem see more than CRA, so it would never request RBDC and the capacity would be wasted. ' +
    'Like pacing, the rate is held under the modem buffer drain bound, so the flows together never put more into the modem while it waits for a grant than one paced flow may. ' +
    'Override the shaping rate with 0 to leave shaping off.'
  );
}

/** What the last write of a profile did (the version made from what runs, and its apply); kept above the editor so
 * it survives the re-selection a new profile's save causes. */
type WriteResult = { profileId: number; outcome: EditOutcome } | { profileId: number; error: string };

function formatValue(d: Derived): string {
  if (d.unit === 'bit/s') return formatBps(d.value);
  if (d.unit === '%') return `${d.value.toPrecision(3)} %`;
  if (d.unit === 'bytes') return `${formatBytes(d.value)} (${Math.round(d.value).toLocaleString()} B)`;
  return `${Number.isInteger(d.value) ? d.value.toLocaleString() : d.value.toFixed(2)} ${d.unit}`;
}

function DerivedTable({ values }: { values: Values }) {
  return (
    <ScrollTable minWidth={640} columns={['Value', 'Result', 'How it is derived']} aria-label="Derived values" verticalSpacing={6}>
      {Object.entries(values).map(([k, d]) => (
        <Table.Tr key={k}>
          <Table.Td className="mono">{k}</Table.Td>
          <Table.Td style={{ whiteSpace: 'nowrap' }}>
            {formatValue(d)} {d.overridden && <Badge size="xs" color="orange">override</Badge>}
          </Table.Td>
          <Table.Td>
            <Text size="xs" className="mono">
              {d.derivation}
            </Text>
          </Table.Td>
        </Table.Tr>
      ))}
    </ScrollTable>
  );
}

function ProfileEditor({
  initial,
  written,
  onSaved,
  onWritten,
}: {
  initial: BodProfileOut | null;
  written: WriteResult | null;
  onSaved: (p: BodProfileOut) => void;
  onWritten: (r: WriteResult) => void;
}) {
  const queryClient = useQueryClient();
  const [form, setForm] = useState<BodProfileIn>(() =>
    // Only the fields the API accepts back: it rejects unknown ones (id, tuning, timestamps).
    initial ? { name: initial.name, inputs: initial.inputs, overrides: initial.overrides } : { name: 'default', inputs: { ...STARTING_INPUTS }, overrides: {} },
  );
  const [errors, setErrors] = useState<FieldErrors>({});
  const [berText, setBerText] = useState(() => String(form.inputs.ber ?? STARTING_INPUTS.ber));
  const [debounced] = useDebouncedValue(form, 300);
  const derived = useQuery({
    queryKey: ['bod', 'derive', debounced],
    queryFn: () => endpoints.bodDerive(debounced),
    placeholderData: keepPreviousData,
    retry: false,
  });
  const canWrite = useCan()('operator');
  const running = useQuery({ queryKey: keys.running, queryFn: endpoints.running, refetchInterval: 10_000 });
  const [confirming, setConfirming] = useState(false);
  const save = useMutation({
    mutationFn: (p: BodProfileIn) => (initial ? endpoints.bodUpdate(initial.id, p) : endpoints.bodCreate(p)),
    onSuccess: async (p) => {
      setErrors({});
      await queryClient.invalidateQueries({ queryKey: keys.bodProfiles });
      onSaved(p);
    },
    onError: (e) => setErrors(e instanceof ApiError ? e.fieldErrors : {}),
  });
  const applyToConfig = useMutation({
    mutationFn: async (confirm: boolean): Promise<WriteResult> => {
      const p = await save.mutateAsync(form);
      const comment = `BoD profile ${p.name}`;
      try {
        // Written into what the gateway runs (pending versions are not in it), then applied: as System settings.
        const change = await endpoints.bodApply(p.id, comment, confirm);
        const apply = change.changed ? await endpoints.applyVersion(change.version_id, comment) : null;
        return { profileId: p.id, outcome: { change, apply } };
      } catch (e) {
        // The profile is saved; the write was refused. Said now, with the reason (the editor may remount).
        return { profileId: p.id, error: errorMessage(e) };
      }
    },
    // Saving a new profile selects it, which remounts this editor: the parent keeps the result.
    onSuccess: (r) => {
      setConfirming(false);
      onWritten(r);
      return Promise.all([...afterConfigChange, ['bod', 'derive']].map((k) => queryClient.invalidateQueries({ queryKey: k })));
    },
  });
  const mine = initial && written?.profileId === initial.id ? written : null;
  const outcome = mine && 'outcome' in mine ? mine.outcome : null;
  const writeError = mine && 'error' in mine ? mine.error : null;
  const problems = derived.data?.config_problems ?? [];
  const risks = derived.data?.link_risks ?? [];
  const write = () => (risks.length ? setConfirming(true) : applyToConfig.mutate(false));
  const deriveErrors = derived.error instanceof ApiError ? derived.error.fieldErrors : {};
  const allErrors = { ...deriveErrors, ...errors };
  const setInput = (k: keyof BodInputs, v: number | string) => setForm({ ...form, inputs: { ...form.inputs, [k]: typeof v === 'number' ? v : Number(v) } });
  const setOverride = (k: string, v: number | string) => {
    const overrides = { ...form.overrides };
    if (v === '' || v === null) delete overrides[k];
    else overrides[k] = Number(v);
    setForm({ ...form, overrides });
  };
  const values = derived.data?.values;

  return (
    <Stack>
      <Paper withBorder p="md" component="section" aria-labelledby="bod-inputs">
        <Title order={3} size="h4" id="bod-inputs" mb="sm">
          Link profile
        </Title>
        <form
          noValidate
          onSubmit={(e) => {
            e.preventDefault();
            save.mutate(form);
          }}
        >
          <Grid>
            <Grid.Col span={{ base: 12, sm: 6 }}>
              <TextInput label="Profile name" required value={form.name} onChange={(e) => setForm({ ...form, name: e.currentTarget.value })} error={errorFor(allErrors, 'name')} />
            </Grid.Col>
            <Grid.Col span={{ base: 12, sm: 6 }}>
              <Text size="sm" fw={500} mb={4} id="bod-role">
                This gateway is the
              </Text>
              <SegmentedControl
                aria-labelledby="bod-role"
                data={choices('Role').map((r) => ({ value: r, label: `${r} (${ROLE_SENDS[r as BodRole] ?? 'sends'})` }))}
                value={form.inputs.role ?? STARTING_INPUTS.role}
                onChange={(v) => setForm({ ...form, inputs: { ...form.inputs, role: v as BodRole } })}
              />
            </Grid.Col>
            {INPUT_FIELDS.map((f) => (
              <Grid.Col key={f.key} span={{ base: 6, sm: 3 }}>
                <NumberInput
                  label={`${f.label} (${f.unit})`}
                  value={form.inputs[f.key] as number}
                  onChange={(v) => setInput(f.key, v)}
                  thousandSeparator=","
                  step={f.step ?? 1}
                  min={0}
                  max={INPUT_MAX[f.key]}
                  clampBehavior="none"
                  description={f.unit === 'bit/s' ? formatBps(form.inputs[f.key] as number) : f.unit === 'bytes' ? formatBytes(form.inputs[f.key] as number) : undefined}
                  error={errorFor(allErrors, `inputs.${f.key}`)}
                />
              </Grid.Col>
            ))}
            <Grid.Col span={{ base: 6, sm: 3 }}>
              <TextInput
                label="Bit error rate (after FEC)"
                description="e.g. 1e-7; 0 = clean"
                value={berText}
                onChange={(e) => {
                  const text = e.currentTarget.value;
                  setBerText(text);
                  const v = Number(text);
                  if (text.trim() !== '' && Number.isFinite(v)) setForm({ ...form, inputs: { ...form.inputs, ber: v } });
                }}
                error={errorFor(allErrors, 'inputs.ber') ?? (berText.trim() === '' || Number.isFinite(Number(berText)) ? undefined : 'a number, e.g. 1e-6')}
              />
            </Grid.Col>
          </Grid>
          <Title order={4} size="h5" mt="md" mb="xs">
            Overrides (optional)
          </Title>
          <Grid>
            {Object.keys(values ?? {}).filter((k) => values?.[k].overridable).map((k) => (
              <Grid.Col key={k} span={{ base: 6, sm: 2 }}>
                <NumberInput
                  label={k}
                  placeholder={values?.[k] ? String(Math.round(values[k].computed)) : 'computed'}
                  value={form.overrides?.[k] ?? ''}
                  onChange={(v) => setOverride(k, v)}
                  min={0}
                  error={errorFor(allErrors, `overrides.${k}`)}
                />
              </Grid.Col>
            ))}
          </Grid>
          {(save.error || applyToConfig.error) && (
            <Alert color="red" role="alert" mt="md">
              {errorMessage(save.error ?? applyToConfig.error)}
            </Alert>
          )}
          {outcome && (
            <Box mt="md">
              <EditOutcomeAlert outcome={outcome} />
            </Box>
          )}
          {writeError && (
            <Alert color="red" role="alert" mt="md" title="The profile is saved, but the config was not changed">
              {writeError}
            </Alert>
          )}
          {problems.length > 0 && (
            <Alert color="red" role="alert" mt="md" title="The config cannot take this derivation">
              <List size="sm">
                {problems.map((p) => (
                  <List.Item key={p}>{p}</List.Item>
                ))}
              </List>
            </Alert>
          )}
          {risks.length > 0 && (
            <Alert color="orange" mt="md" title="Outside the link's physics">
              <List size="sm">
                {risks.map((p) => (
                  <List.Item key={p}>{p}</List.Item>
                ))}
              </List>
            </Alert>
          )}
          {canWrite && (
            <Group justify="flex-end" mt="md">
              <Button type="submit" variant="default" loading={save.isPending && !applyToConfig.isPending}>
                Save profile
              </Button>
              <Button onClick={write} loading={applyToConfig.isPending} disabled={problems.length > 0 || !derived.data}>
                Save, write to config and apply
              </Button>
            </Group>
          )}
          <Modal opened={confirming} onClose={() => setConfirming(false)} title="Write these values to the config and apply them?" size="lg">
            <Stack>
              <Text size="sm">These inputs are outside what this satellite link can be:</Text>
              <List size="sm" aria-label="Risks of this profile">
                {risks.map((p) => (
                  <List.Item key={p}>{p}</List.Item>
                ))}
              </List>
              <Group justify="flex-end">
                <Button variant="default" onClick={() => setConfirming(false)}>
                  Change the inputs
                </Button>
                <Button color="orange" loading={applyToConfig.isPending} onClick={() => applyToConfig.mutate(true)}>
                  Write them anyway
                </Button>
              </Group>
            </Stack>
          </Modal>
        </form>
      </Paper>
      <Paper withBorder p="md" component="section" aria-labelledby="bod-derived">
        <Group justify="space-between" mb="sm">
          <Title order={3} size="h4" id="bod-derived">
            Derived tuning
          </Title>
          {derived.isFetching && <Text size="xs" c="dimmed">updating…</Text>}
        </Group>
        {derived.error && (
          <Alert color="red" role="alert" mb="sm">
            {/* A refusal the form shows under its field is not said a second time here. */}
            {Object.keys(deriveErrors).length > 0 ? 'Fix the marked input to see the derivation.' : errorMessage(derived.error)}
          </Alert>
        )}
        {derived.data?.warnings.length ? (
          <Alert color="yellow" title="Warnings" mb="sm">
            <List size="sm">
              {derived.data.warnings.map((w) => (
                <List.Item key={w}>{w}</List.Item>
              ))}
            </List>
          </Alert>
        ) : null}
        {derived.data && (
          <Text size="sm" mb="sm" id="bod-cc-why">
            <Text span fw={600}>
              Satellite congestion control: <span className="mono">{derived.data.congestion_control.value}</span>.{' '}
            </Text>
            {derived.data.congestion_control.derivation}
          </Text>
        )}
        {values ? <DerivedTable values={values} /> : !derived.error && <Text c="dimmed">Deriving…</Text>}
        {values?.shaping_rate_bps && (
          <Text size="sm" mt="sm" id="bod-shaping-why">
            <Text span fw={600}>
              Shaping ({values.shaping_rate_bps.value > 0 ? formatBps(values.shaping_rate_bps.value) : 'off'}):{' '}
            </Text>
            {shapingExplanation(form.inputs.role ?? STARTING_INPUTS.role)}
          </Text>
        )}
      </Paper>
      {derived.data && (
        <Paper withBorder p="md" component="section" aria-labelledby="bod-diff">
          <Title order={3} size="h4" id="bod-diff" mb="sm">
            Change to what the gateway runs
          </Title>
          {canWrite && <PendingVersionsNote running={running.data} subject="Writing this profile" />}
          {derived.data.config_changes.length === 0 ? (
            <Text size="sm">What the gateway runs has these values already.</Text>
          ) : (
            <Table aria-label="Config changes from this profile">
              <Table.Thead>
                <Table.Tr>
                  <Table.Th>Setting</Table.Th>
                  <Table.Th>Now</Table.Th>
                  <Table.Th>With this profile</Table.Th>
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {derived.data.config_changes.map((c) => (
                  <Table.Tr key={c.path}>
                    <Table.Td className="mono">{c.path.replace(/^\$\./, '')}</Table.Td>
                    <Table.Td>{shown(c.old)}</Table.Td>
                    <Table.Td fw={700} c="orange">
                      {shown(c.new)} (changes)
                    </Table.Td>
                  </Table.Tr>
                ))}
              </Table.Tbody>
            </Table>
          )}
        </Paper>
      )}
    </Stack>
  );
}

export default function BodPage() {
  const profiles = useQuery({ queryKey: keys.bodProfiles, queryFn: endpoints.bodProfiles });
  const [selected, setSelected] = useState<string>('');
  const [written, setWritten] = useState<WriteResult | null>(null);
  return (
    <>
      <PageHeader title="BoD tuning" description="Describe the bandwidth-on-demand link; the API derives the satellite-leg settings and shows how each number comes about." />
      <QueryView query={profiles}>
        {(list) => {
          const current = list.find((p) => String(p.id) === selected) ?? (selected === 'new' ? null : list[0] ?? null);
          return (
            <Stack>
              <Select
                label="Profile"
                w={280}
                allowDeselect={false}
                data={[...list.map((p) => ({ value: String(p.id), label: p.name })), { value: 'new', label: '+ new profile' }]}
                value={current ? String(current.id) : 'new'}
                onChange={(v) => {
                  setSelected(v ?? '');
                  setWritten(null);
                }}
              />
              <ProfileEditor
                key={current ? current.id : 'new'}
                initial={current}
                written={written}
                onSaved={(p) => setSelected(String(p.id))}
                onWritten={setWritten}
              />
            </Stack>
          );
        }}
      </QueryView>
    </>
  );
}
