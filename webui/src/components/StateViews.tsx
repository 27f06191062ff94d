import { Alert, Button, Center, Group, Loader, Stack, Text } from '@mantine/core';
import type { ReactNode } from 'react';
import { errorMessage } from '../api/errors';

export function LoadingState({ label = 'Loading…' }: { label?: string }) {
  return (
    <Center py="xl" role="status" aria-live="polite">
      <Group gap="sm">
        <Loader size="sm" />
        <Text c="dimmed">{label}</Text>
      </Group>
    </Center>
  );
}

export function EmptyState({ title, children }: { title: string; children?: ReactNode }) {
  return (
    <Center py="xl">
      <Stack gap={4} align="center">
        <Text fw={600}>{title}</Text>
        {children && <Text c="dimmed" size="sm" ta="center">{children}</Text>}
      </Stack>
    </Center>
  );
}

export function ErrorState({ error, onRetry, title = 'Could not load data' }: { error: unknown; onRetry?: () => void; title?: string }) {
  return (
    <Alert color="red" title={title} role="alert">
      <Stack gap="xs">
        <Text size="sm">{errorMessage(error)}</Text>
        {onRetry && (
          <Group>
            <Button size="xs" variant="light" color="red" onClick={onRetry}>
              Retry
            </Button>
          </Group>
        )}
      </Stack>
    </Alert>
  );
}

interface QueryLike<T> {
  data: T | undefined;
  error: unknown;
  isPending: boolean;
  refetch: () => unknown;
}

/** Renders loading / error / empty states for a query, and children(data) once it has data. */
export function QueryView<T>({
  query,
  isEmpty,
  empty,
  loadingLabel,
  children,
}: {
  query: QueryLike<T>;
  isEmpty?: (data: T) => boolean;
  empty?: ReactNode;
  loadingLabel?: string;
  children: (data: T) => ReactNode;
}) {
  if (query.isPending) return <LoadingState label={loadingLabel} />;
  if (query.error || query.data === undefined) return <ErrorState error={query.error ?? 'No data'} onRetry={() => void query.refetch()} />;
  if (isEmpty?.(query.data)) return <>{empty ?? <EmptyState title="Nothing here yet" />}</>;
  return <>{children(query.data)}</>;
}
