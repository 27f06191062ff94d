import { Alert, Button, Group, Modal, Stack, Text } from '@mantine/core';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { errorMessage } from '../../api/errors';
import { managedEndpoints, managedKeys, type ManagedVersion } from '../../api/managed';

/** The confirm step of cancelling a version the terminal has not been sent yet: what happens is named first. */
export function CancelVersionModal({ terminal, version, onClose }: { terminal: string; version: ManagedVersion; onClose: () => void }) {
  const queryClient = useQueryClient();
  const cancel = useMutation({
    mutationFn: () => managedEndpoints.cancelVersion(terminal, version.id),
    onSuccess: onClose,
    // Refused or not, the table shows what the hub holds now (a version sent meanwhile is no longer cancellable).
    onSettled: () => Promise.all([managedKeys.versions(terminal), managedKeys.detail(terminal)].map((queryKey) => queryClient.invalidateQueries({ queryKey }))),
  });
  return (
    <Modal opened onClose={onClose} title={`Cancel version ${version.id} for ${terminal}?`}>
      <Stack>
        <Text size="sm" data-testid="cancel-consequence">
          {terminal} never gets version {version.id} ({version.sections.join(', ')}): its long poll skips it and the versions made after it still go out in order.
          It stays in this list as cancelled, under your name. A version already sent cannot be cancelled: make a new version instead.
        </Text>
        {cancel.error != null && (
          <Alert color="red" role="alert" title="Not cancelled">
            <Text size="sm">{errorMessage(cancel.error)}</Text>
          </Alert>
        )}
        <Group justify="flex-end">
          <Button variant="default" onClick={onClose}>
            Keep it
          </Button>
          <Button color="red" onClick={() => cancel.mutate()} loading={cancel.isPending}>
            Cancel version {version.id}
          </Button>
        </Group>
      </Stack>
    </Modal>
  );
}
