import { Badge, Group } from '@mantine/core';
import { FlowsTable } from '../components/FlowsTable';
import { PageHeader } from '../components/PageHeader';
import { LoadingState } from '../components/StateViews';
import { useLiveFlows } from '../live/LiveFlowsContext';

export default function FlowsPage() {
  const live = useLiveFlows();
  const waiting = live.updates === 0 && live.status !== 'open';
  return (
    <>
      <PageHeader
        title="Flows"
        description="Every TCP connection through the gateway, updated live. Select an ID for both legs' RTT, cwnd and rate over time."
        actions={
          <Group gap="xs">
            <Badge variant="light">{live.flows.length.toLocaleString()} live</Badge>
          </Group>
        }
      />
      {waiting ? <LoadingState label="Connecting to the live flow stream…" /> : <FlowsTable flows={live.flows} height={Math.max(320, window.innerHeight - 300)} />}
    </>
  );
}
