import { Stack, Text } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { endpoints } from '../../api/endpoints';
import { keys } from '../../api/keys';
import { managedEndpoints, managedKeys } from '../../api/managed';
import { useCan } from '../../auth/roles';
import { formatTime } from '../../lib/format';
import { LoadingState, QueryView } from '../StateViews';
import { JoinHubForm } from './JoinHubForm';
import { ManagedLine } from './ManagedBanner';

/** System settings at a terminal: the hub that manages it, or (an admin, not managed yet) joining one. */
export function HubManagementCard() {
  const isAdmin = useCan()('admin');
  const status = useQuery({ queryKey: managedKeys.status, queryFn: managedEndpoints.status, refetchInterval: 10_000 });
  const desired = useQuery({ queryKey: keys.desired, queryFn: endpoints.desiredConfig });
  return (
    <QueryView query={status}>
      {(s) => {
        if (s.managed)
          return (
            <Stack gap="xs" data-testid="managed-status">
              <Text size="sm" fw={600}>
                Managed from the hub {s.hub_url} as {s.name}
              </Text>
              <Text size="sm">Joined {formatTime(s.joined_at)}. Its config versions from the hub are applied here as local versions (author "hub").</Text>
              <ManagedLine s={s} />
            </Stack>
          );
        if (desired.isPending) return <LoadingState />;
        if (desired.data?.config.role === 'hub') return <Text size="sm">This gateway is a hub: it manages the terminals enrolled with its tokens (Terminals page).</Text>;
        if (!isAdmin) return <Text size="sm">Not managed from a hub. An admin can join one here.</Text>;
        return (
          <Stack gap="xs">
            {s.last_error && (
              <Text size="sm" c="red">
                The last join failed: {s.last_error}
              </Text>
            )}
            <JoinHubForm />
          </Stack>
        );
      }}
    </QueryView>
  );
}
