import { Alert, Badge, Button, Group, NumberInput, Paper, Stack, Table, Text, Title, Tooltip } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useSearchParams } from 'react-router-dom';
import { endpoints, type ApplyOut, type VersionSummary } from '../api/endpoints';
import { errorMessage } from '../api/errors';
import { afterConfigChange, keys } from '../api/keys';
import { DiffView } from '../components/DiffView';
import { PageHeader } from '../components/PageHeader';
import { DryRunResult } from '../components/DryRunResult';
import { useCan } from '../auth/roles';
import { ScrollTable } from '../components/ScrollTable';
import { EmptyState, QueryView } from '../components/StateViews';
import { formatTime } from '../lib/format';

/** A badge that never truncates its word in a narrow column. */
const WHOLE = { root: { maxWidth: 'none', flexShrink: 0 }, label: { overflow: 'visible' } } as const;

function StatusBadge({ v }: { v: VersionSummary }) {
  if (v.active) return <Badge color="green" styles={WHOLE}>active</Badge>;
  if (v.apply_status === 'failed') return <Badge color="red" styles={WHOLE}>apply failed</Badge>;
  if (v.apply_status === 'applied') return <Badge color="gray" variant="light" styles={WHOLE}>applied before</Badge>;
  return <Badge color="yellow" variant="light" styles={WHOLE}>not applied</Badge>;
}

function applyMessage(r: ApplyOut): string {
  if (r.ok) return `Version ${r.version_id} is active${r.revision ? ` (gateway revision ${r.revision})` : ''}.`;
  const err = r.error as { message?: string; field?: string } | null;
  return `Version ${r.version_id} was not applied: ${err?.message ?? 'gateway refused it'}${err?.field ? ` (step ${err.field})` : ''}. The previous state stays.`;
}

function DiffPanel({ a, b, onChange }: { a: number; b: number; onChange: (a: number, b: number) => void }) {
  const diff = useQuery({ queryKey: keys.diff(a, b), queryFn: () => endpoints.diff(a, b) });
  return (
    <Paper withBorder p="md" component="section" aria-labelledby="diff-title">
      <Group justify="space-between" mb="sm" wrap="wrap">
        <Title order={3} size="h4" id="diff-title">
          Diff: version {a} → version {b}
        </Title>
        <Group gap="xs">
          <NumberInput label="From" w={100} min={1} value={a} onChange={(v) => onChange(Number(v) || a, b)} />
          <NumberInput label="To" w={100} min={1} value={b} onChange={(v) => onChange(a, Number(v) || b)} />
        </Group>
      </Group>
      <QueryView query={diff}>{(d) => <DiffView changes={d.changes} />}</QueryView>
    </Paper>
  );
}

export default function HistoryPage() {
  const queryClient = useQueryClient();
  const [params, setParams] = useSearchParams();
  const versions = useQuery({ queryKey: keys.versions, queryFn: () => endpoints.versions(200) });
  const refresh = () => Promise.all(afterConfigChange.map((k) => queryClient.invalidateQueries({ queryKey: k })));
  const apply = useMutation({ mutationFn: (id: number) => endpoints.applyVersion(id), onSettled: refresh });
  const rollback = useMutation({ mutationFn: (id: number) => endpoints.rollback(id), onSettled: refresh });
  const validate = useMutation({ mutationFn: (id: number) => endpoints.validateVersion(id) });
  const a = Number(params.get('a')) || 0;
  const b = Number(params.get('b')) || 0;
  const showDiff = (from: number, to: number) => setParams({ a: String(from), b: String(to) });
  const canWrite = useCan()('operator');
  const busy = apply.isPending || rollback.isPending;
  const result = apply.data ?? rollback.data?.apply;

  return (
    <>
      <PageHeader title="Config history" description="Every change is a new version. Compare any two, validate on the gateway, apply, or roll back." />
      <Stack>
        {result && (
          <Alert color={result.ok ? 'green' : 'red'} role={result.ok ? 'status' : 'alert'} withCloseButton closeButtonLabel="Dismiss" onClose={() => { apply.reset(); rollback.reset(); }}>
            {rollback.data && `Rolled back as version ${rollback.data.new_version_id}. `}
            {applyMessage(result)}
          </Alert>
        )}
        {(apply.error || rollback.error) && (
          <Alert color="red" role="alert">
            {errorMessage(apply.error ?? rollback.error)}
          </Alert>
        )}
        {validate.data && <DryRunResult result={validate.data} onClose={() => validate.reset()} />}
        {validate.error && <Alert color="red" role="alert">{errorMessage(validate.error)}</Alert>}
        {a > 0 && b > 0 && <DiffPanel a={a} b={b} onChange={showDiff} />}
        <QueryView query={versions} isEmpty={(d) => d.versions.length === 0} empty={<EmptyState title="No versions yet" />}>
          {(data) => (
            <ScrollTable minWidth={760} columns={['Version', 'Created', 'Author', 'Comment', 'Status']} actions striped highlightOnHover aria-label="Config versions">
              {data.versions.map((v) => (
                <Table.Tr key={v.id}>
                  <Table.Td fw={600}>v{v.id}</Table.Td>
                  <Table.Td>
                    <Text size="sm">{formatTime(v.created_at)}</Text>
                  </Table.Td>
                  <Table.Td>{v.author}</Table.Td>
                  <Table.Td>{v.comment}</Table.Td>
                  <Table.Td style={{ whiteSpace: 'nowrap' }}>
                    <StatusBadge v={v} />
                  </Table.Td>
                  <Table.Td>
                    <Group gap={4} justify="flex-end" wrap="nowrap">
                      {v.id > 1 && (
                        <Button size="compact-xs" variant="default" aria-label={`Diff version ${v.id} against ${v.id - 1}`} onClick={() => showDiff(v.id - 1, v.id)}>
                          Diff
                        </Button>
                      )}
                      {canWrite && <Button size="compact-xs" variant="default" loading={validate.isPending && validate.variables === v.id} onClick={() => validate.mutate(v.id)} aria-label={`Dry run version ${v.id}`}>
                        Dry run
                      </Button>}
                      {canWrite && !v.active && v.id === data.latest_version_id && (
                        <Button size="compact-xs" disabled={busy} loading={apply.isPending && apply.variables === v.id} onClick={() => apply.mutate(v.id)} aria-label={`Apply version ${v.id}`}>
                          Apply
                        </Button>
                      )}
                      {canWrite && v.id !== data.latest_version_id && (
                        <Tooltip label="Make a new version equal to this one and apply it">
                          <Button
                            size="compact-xs"
                            color="orange"
                            variant="light"
                            disabled={busy}
                            loading={rollback.isPending && rollback.variables === v.id}
                            aria-label={`Roll back to version ${v.id}`}
                            onClick={() => {
                              if (window.confirm(`Roll back to version ${v.id}? A new version is created and applied.`)) rollback.mutate(v.id);
                            }}
                          >
                            Roll back
                          </Button>
                        </Tooltip>
                      )}
                    </Group>
                  </Table.Td>
                </Table.Tr>
              ))}
            </ScrollTable>
          )}
        </QueryView>
      </Stack>
    </>
  );
}
