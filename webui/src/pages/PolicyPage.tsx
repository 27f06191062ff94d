import { ActionIcon, Alert, Badge, Button, Group, Modal, Stack, Table, Text, TextInput } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { endpoints } from '../api/endpoints';
import { ApiError, errorMessage, type FieldErrors } from '../api/errors';
import { keys } from '../api/keys';
import { IssueList, issuesFromDetails } from '../components/IssueList';
import { PageHeader } from '../components/PageHeader';
import { ScrollTable } from '../components/ScrollTable';
import { EmptyState, QueryView } from '../components/StateViews';
import { EditOutcomeAlert, PendingVersionsNote, ReviewAndSave, useRunningEdit } from '../components/RunningEdit';
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

/** A change to the classes, made against what the gateway runs. */
type PolicyEdit = { kind: 'save'; original: string | null; value: TrafficClass; comment: string } | { kind: 'delete'; name: string };

function send(e: PolicyEdit, preview: boolean) {
  if (e.kind === 'delete') return endpoints.deleteClass(e.name, preview);
  const body = { ...e.value, comment: e.comment };
  return e.original === null ? endpoints.createClass(body, preview) : endpoints.updateClass(e.original, body, preview);
}

const commentOf = (e: PolicyEdit) => (e.kind === 'delete' ? `delete class ${e.name}` : e.comment || `${e.original === null ? 'add' : 'update'} class ${e.value.name}`);

export default function PolicyPage() {
  const classes = useQuery({ queryKey: keys.classes, queryFn: endpoints.classes });
  const [editing, setEditing] = useState<Editing | null>(null);
  const [deleting, setDeleting] = useState<string | null>(null);
  const [errors, setErrors] = useState<FieldErrors>({});
  const [comment, setComment] = useState('');
  const canEdit = useCan()('operator');
  const edit = useRunningEdit(send, commentOf);
  const current: PolicyEdit | null = editing ? { kind: 'save', original: editing.original, value: editing.value, comment } : null;
  const removal: PolicyEdit | null = deleting ? { kind: 'delete', name: deleting } : null;
  const review = edit.reviewOf(current);
  const removalReview = edit.reviewOf(removal);
  const failure = edit.preview.error ?? edit.save.error;

  const open = (e: Editing) => {
    setEditing(e);
    setErrors({});
    setComment('');
    edit.reset();
  };
  const fieldErrors = (e: unknown) => setErrors(e instanceof ApiError ? e.fieldErrors : {});
  const submit = () => {
    if (!current || !editing) return;
    const others = (classes.data?.classes ?? []).map((c) => c.name).filter((n) => n !== editing.original);
    const local = validateClass(editing.value, others);
    setErrors(local);
    if (Object.keys(local).length === 0) edit.preview.mutate(current, { onError: fieldErrors });
  };
  const saveIt = (e: PolicyEdit) =>
    edit.save.mutate(e, {
      onSuccess: () => {
        setEditing(null);
        setDeleting(null);
      },
      onError: fieldErrors,
    });
  const nextPriority = Math.max(0, ...(classes.data?.classes ?? []).map((c) => c.priority)) + 10;
  // A refusal that names a field of the form is shown under that field only, not a second time on top.
  const shownUnderFields = Object.keys(errors).some((k) => FORM_FIELDS.some((f) => k === f || k.startsWith(`${f}.`)));
  const conflictIssues = failure instanceof ApiError ? issuesFromDetails(failure.details) : [];

  return (
    <>
      <PageHeader
        title="Policy"
        description="Traffic classes, evaluated by priority (lower first); the first match decides: accelerate, cache or bypass. These are the classes the gateway runs; a change is made to them and applied."
        actions={canEdit ? <Button onClick={() => open({ original: null, value: newTrafficClass(nextPriority) })}>Add class</Button> : undefined}
      />
      {!editing && !deleting && <EditOutcomeAlert outcome={edit.outcome} onClose={edit.clearOutcome} />}
      {canEdit && <PendingVersionsNote running={edit.running} />}
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
                          onClick={() => {
                            edit.reset();
                            setDeleting(c.name);
                            edit.preview.mutate({ kind: 'delete', name: c.name });
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
      <Modal opened={deleting !== null} onClose={() => setDeleting(null)} title={`Delete class ${deleting ?? ''}?`} size="xl">
        <Stack>
          {failure && <Alert color="red" role="alert">{errorMessage(failure)}</Alert>}
          {removalReview && removal ? (
            <ReviewAndSave change={removalReview} running={edit.running} onSave={() => saveIt(removal)} saving={edit.save.isPending} label="Delete and apply" />
          ) : (
            !failure && <Text size="sm" c="dimmed">Asking the API what this changes…</Text>
          )}
        </Stack>
      </Modal>
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
              {failure && !shownUnderFields && (
                <Alert color="red" role="alert" title="The API refused the change">
                  {errorMessage(failure)}
                </Alert>
              )}
              <IssueList issues={conflictIssues} title="Conflicts with other classes" />
              <TrafficClassForm idPrefix="class" value={editing.value} onChange={(v) => setEditing({ ...editing, value: v })} errors={errors} />
              <TextInput label="Change comment" description="Recorded with the new config version" value={comment} onChange={(e) => setComment(e.currentTarget.value)} />
              {review && current ? (
                <ReviewAndSave change={review} running={edit.running} onSave={() => saveIt(current)} saving={edit.save.isPending} />
              ) : null}
              <Group justify="flex-end">
                <Button variant="default" onClick={() => setEditing(null)}>Cancel</Button>
                <Button type="submit" variant={review ? 'default' : 'filled'} loading={edit.preview.isPending}>Review changes</Button>
              </Group>
            </Stack>
          </form>
        )}
      </Modal>
    </>
  );
}
