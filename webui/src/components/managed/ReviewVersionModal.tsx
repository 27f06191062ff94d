import { Alert, Button, Code, Group, List, Modal, Stack, Text } from '@mantine/core';
import { ApiError, errorMessage } from '../../api/errors';
import type { Sections } from '../../lib/managed-sections';

/** The API's refusal: its message and, when it names them, the fields. */
export function RefusalAlert({ error }: { error: unknown }) {
  // The fields it names, unless their message is the one already shown.
  const fields = error instanceof ApiError ? Object.entries(error.fieldErrors).filter(([, msg]) => msg !== error.message) : [];
  return (
    <Alert color="red" role="alert" title="The hub refused this version: nothing was stored">
      <Text size="sm">{errorMessage(error)}</Text>
      {fields.length > 0 && (
        <List size="sm" mt={4}>
          {fields.map(([path, msg]) => (
            <List.Item key={path}>
              <Code>{path}</Code>: {msg}
            </List.Item>
          ))}
        </List>
      )}
    </Alert>
  );
}

/** What a new version changes, named before it is sent: each section it sets, as it will be set. */
export function ReviewVersionModal({
  terminal,
  sections,
  comment,
  error,
  pending,
  onSend,
  onClose,
}: {
  terminal: string;
  sections: Sections;
  comment: string;
  error: unknown;
  pending: boolean;
  onSend: () => void;
  onClose: () => void;
}) {
  const names = Object.keys(sections);
  return (
    <Modal opened onClose={onClose} title={`Send a version to ${terminal}?`} size="lg">
      <Stack>
        <Text size="sm" data-testid="version-consequence">
          {terminal} sets {names.length === 1 ? 'its section' : `these ${names.length} sections`} {names.join(', ')} at its next poll, applies the result as a local
          version and reports back; if its gateway refuses it, it keeps what it ran. Nothing else of its config changes.
        </Text>
        <List size="sm" aria-label="Sections this version sets" spacing="xs">
          {names.map((n) => (
            <List.Item key={n}>
              <Text size="sm" fw={600}>
                {n}
              </Text>
              <Code block style={{ maxHeight: 160, overflow: 'auto' }}>
                {JSON.stringify(sections[n], null, 2)}
              </Code>
            </List.Item>
          ))}
        </List>
        {comment && <Text size="sm">Comment: {comment}</Text>}
        {error != null && <RefusalAlert error={error} />}
        <Group justify="flex-end">
          <Button variant="default" onClick={onClose}>
            Cancel
          </Button>
          <Button onClick={onSend} loading={pending}>
            Send to {terminal}
          </Button>
        </Group>
      </Stack>
    </Modal>
  );
}
