import { Badge, Tooltip } from '@mantine/core';
import { useLiveFlows } from './LiveFlowsContext';

const LOOK = {
  open: { color: 'green', text: 'Live' },
  connecting: { color: 'gray', text: 'Connecting' },
  reconnecting: { color: 'orange', text: 'Reconnecting' },
  closed: { color: 'gray', text: 'Offline' },
} as const;

export function LiveStatusBadge() {
  const { status, reconnects } = useLiveFlows();
  const look = LOOK[status];
  return (
    <Tooltip label={`Live flow stream: ${look.text.toLowerCase()}${reconnects ? ` (${reconnects} reconnects)` : ''}`}>
      <Badge color={look.color} variant="dot" role="status" aria-live="polite" visibleFrom="xs">
        {look.text}
      </Badge>
    </Tooltip>
  );
}
