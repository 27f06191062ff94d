import { Badge, Group, Tabs } from '@mantine/core';
import { useSearchParams } from 'react-router-dom';
import { ClosedFlows } from '../components/ClosedFlows';
import { FlowsTable } from '../components/FlowsTable';
import { PageHeader } from '../components/PageHeader';
import { LoadingState } from '../components/StateViews';
import { useLiveFlows } from '../live/LiveFlowsContext';

export default function FlowsPage() {
  const live = useLiveFlows();
  const [params, setParams] = useSearchParams();
  const tab = params.get('tab') === 'closed' ? 'closed' : 'live';
  const waiting = live.updates === 0 && live.status !== 'open';
  const streamError = live.error;
  return (
    <>
      <PageHeader
        title="Flows"
        description="Every TCP connection the gateway split or its cache served, updated live; bytes are what crossed the satellite. Bypassed and unsplit traffic is not listed: it counts in the link figures (Overview) and per rule (IPsec bypass). Select an ID for both legs' RTT, cwnd and rate over time."
        actions={
          <Group gap="xs">
            <Badge variant="light">{live.flows.length.toLocaleString()} live</Badge>
            {streamError && <Badge color="red" variant="light" title={streamError}>gateway error</Badge>}
          </Group>
        }
      />
      <Tabs value={tab} onChange={(v) => setParams(v === 'closed' ? { tab: 'closed' } : {})} keepMounted={false}>
        <Tabs.List mb="sm">
          <Tabs.Tab value="live">Live</Tabs.Tab>
          <Tabs.Tab value="closed">Closed (history)</Tabs.Tab>
        </Tabs.List>
        <Tabs.Panel value="live">
          {waiting ? <LoadingState label="Connecting to the live flow stream…" /> : <FlowsTable flows={live.flows} height={Math.max(320, window.innerHeight - 340)} />}
        </Tabs.Panel>
        <Tabs.Panel value="closed">
          <ClosedFlows />
        </Tabs.Panel>
      </Tabs>
    </>
  );
}
