import { ActionIcon, Alert, Badge, Button, Group, Modal, Stack, Table, Text, TextInput } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { endpoints, type ChangeOut } from '../api/endpoints';
import { ApiError, errorMessage, type FieldErrors } from '../api/errors';
import { afterConfigChange, keys } from '../api/keys';
import { IssueList, issuesFromDetails } from '../components/IssueList';
import { PageHeader } from '../components/PageHeader';
import { ScrollTable } from '../components/ScrollTable';
import { EmptyState, QueryView } from '../components/StateViews';
import { SavedAlert } from '../components/SavedAlert';
import { PendingNotice } from '../components/PendingNotice';
import { TrafficClassForm } from '../components/TrafficClassForm';
import { useCan } from '../auth/roles';
import type { TrafficClass } from '../api/endpoints';
import { newTrafficClass, normaliseClass } from '../lib/classes';
import { validateClass } from '../lib/class-validation';

/** The paths the class form shows errors under. */
const FORM_FIELDS = ['name', 'priority', 'action', 'match', 'satellite'];

interface Editing {
  original: string | null; // null = new class
  value: TrafficClass;
}

export default function PolicyPage() {
  const queryClient = useQueryClient();
  const classes = useQuery({ queryKey: keys.classes, queryFn: endpoints.classes });
  const [editing, setEditing] = useState<Editing | null>(null);
  const [errors, setErrors] = useState<FieldErrors>({});
  const [comment, setComment] = useState('');
  const [saved, setSaved] = useState<ChangeOut | null>(null);
  const canEdit = useCan()('operator');

  const refresh = () => Promise.all(afterConfigChange.map((k) => queryClient.invalidateQueries({ queryKey: k })));
  const save = useMutation({
    mutationFn: (e: Editing) =>
      e.original === null ? endpoints.createClass({ ...e.value, comment }) : endpoints.updateClass(e.original, { ...e.value, comment }),
    onSuccess: async (res) => {
      setSaved(res);
      setEditing(null);
      await refresh();
    },
    onError: (err) => setErrors(err instanceof ApiError ? err.fieldErrors : {}),
  });
  const remove = useMutation({
    mutationFn: (name: string) => endpoints.deleteClass(name),
    onSuccess: async (res) => {
      setSaved(res);
      await refresh();
    },
  });

  const open = (e: Editing) => {
    setEditing(e);
    setErrors({});
    setComment('');
    save.reset();
  };
  const submit = () => {
    if (!editing) return;
    const others = (classes.data?.classes ?? []).map((c) => c.name).filter((n) => n !== editing.original);
    const local = validateClass(editing.value, others);
    setErrors(local);
    if (Object.keys(local).length === 0) save.mutate(editing);
  };
  const nextPriority = Math.max(0, ...(classes.data?.classes ?? []).map((c) => c.priority)) + 10;
  // A refusal that names a field of the form is shown under that field only, not a second time on top.
  const shownUnderFields = Object.keys(errors).some((k) => FORM_FIELDS.some((f) => k === f || k.startsWith(`${f}.`)));
  const conflictIssues = save.error instanceof ApiError ? issuesFromDetails(save.error.details) : [];

  return (
    <>
      <PageHeader
        title="Policy"
        description="Traffic classes, evaluated by priority (lower first); the first match decides: accelerate, cache or bypass."
        actions={canEdit ? <Button onClick={() => open({ original: null, value: newTrafficClass(nextPriority) })}>Add class</Button> : undefined}
      />
      {saved && (
        <SavedAlert saved={saved} onClose={() => setSaved(null)} />
      )}
      <PendingNotice />
      {remove.error && <Alert color="red" mb="md" role="alert">{errorMessage(remove.error)}</Alert>}
      <QueryView query={classes}>
        {(data) => (
          <Stack>
            <IssueList issues={data.issues} />
            {data.classes.length === 0 ? (
              <EmptyState title="No traffic classes">Unmatched TCP traffic from served subnets is accelerated with the satellite defaults.</EmptyState>
            ) : (
              <ScrollTable minWidth={720} columns={['Priority', 'Name', 'Action', 'Match', 'Satellite CC']} actions striped highlightOnHover>
                {data.classes.map(normaliseClass).sort((a, b) => a.priority - b.priority).map((c) => (
                  <Table.Tr key={c.name}>
                    <Table.Td>{c.priority}</Table.Td>
                    <Table.Td fw={600}>{c.name}</Table.Td>
                    <Table.Td><Badge variant="light">{c.action}</Badge></Table.Td>
                    <Table.Td>
                      <Text size="sm" className="mono">
                        {c.match.protocol}
                        {c.match.dports.length ? ` dport ${c.match.dports.join(',')}` : ''}
                        {c.match.src.length ? ` src ${c.match.src.join(',')}` : ''}
                        {c.match.dst.length ? ` dst ${c.match.dst.join(',')}` : ''}
                      </Text>
                    </Table.Td>
                    <Table.Td>{c.satellite.congestion_control ?? 'inherit'}</Table.Td>
                    <Table.Td>
                      {canEdit && <Group gap={4} justify="flex-end" wrap="nowrap">
                        <Button size="xs" variant="default" aria-label={`Edit class ${c.name}`} onClick={() => open({ original: c.name, value: structuredClone(c) })}>
                          Edit
                        </Button>
                        <ActionIcon
                          variant="subtle"
                          color="red"
                          aria-label={`Delete class ${c.name}`}
                          loading={remove.isPending && remove.variables === c.name}
                          onClick={() => {
                            if (window.confirm(`Delete class ${c.name}?`)) remove.mutate(c.name);
                          }}
                        >
                          ✕
                        </ActionIcon>
                      </Group>}
                    </Table.Td>
                  </Table.Tr>
                ))}
              </ScrollTable>
            )}
          </Stack>
        )}
      </QueryView>
      <Modal opened={editing !== null} onClose={() => setEditing(null)} title={editing?.original ? `Edit class ${editing.original}` : 'New traffic class'} size="xl">
        {editing && (
          <form
            noValidate
            onSubmit={(e) => {
              e.preventDefault();
              submit();
            }}
          >
            <Stack>
              {save.error && !shownUnderFields && (
                <Alert color="red" role="alert" title="The API refused the change">
                  {errorMessage(save.error)}
                </Alert>
              )}
              <IssueList issues={conflictIssues} title="Conflicts with other classes" />
              <TrafficClassForm idPrefix="class" value={editing.value} onChange={(v) => setEditing({ ...editing, value: v })} errors={errors} />
              <TextInput label="Change comment" description="Recorded with the new config version" value={comment} onChange={(e) => setComment(e.currentTarget.value)} />
              <Group justify="flex-end">
                <Button variant="default" onClick={() => setEditing(null)}>Cancel</Button>
                <Button type="submit" loading={save.isPending}>Save</Button>
              </Group>
            </Stack>
          </form>
        )}
      </Modal>
    </>
  );
}
