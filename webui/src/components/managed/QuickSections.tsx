import { Button, Group, NumberInput, Select, Stack, Switch, Text } from '@mantine/core';
import { useState } from 'react';
import { MANAGED_SECTIONS } from '../../api/managed';
import { bounds } from '../../lib/schema-check';

const QUIC = [
  { value: 'fallback', label: 'fallback: blocked, browsers use TCP (accelerated)' },
  { value: 'pass', label: 'pass: UDP 443 goes through untouched' },
];

/** Typed fields for the sections most often set, and any section from the gateway's defaults: each writes its
 *  section into the editor (`onSet`), where it is seen and can be changed before anything is sent. */
export function QuickSections({ onSet, onDefault }: { onSet: (name: string, value: unknown) => void; onDefault: (name: string) => void }) {
  const [quic, setQuic] = useState('fallback');
  const [shapingOn, setShapingOn] = useState(true);
  const [rateMbit, setRateMbit] = useState<number | string>(10);
  const [queue, setQueue] = useState<number | string>(1000);
  const [section, setSection] = useState<string | null>(null);
  const rate = bounds('Shaping', 'rate_bps');
  const q = bounds('Shaping', 'queue_packets');
  return (
    <Stack gap="xs">
      <Group align="flex-end" wrap="wrap">
        <Select label="QUIC (UDP 443)" data={QUIC} value={quic} onChange={(v) => v && setQuic(v)} allowDeselect={false} w={360} />
        <Button variant="default" onClick={() => onSet('quic', quic)}>
          Set quic
        </Button>
      </Group>
      <Group align="flex-end" wrap="wrap">
        <Switch label="Shape the satellite side" checked={shapingOn} onChange={(e) => setShapingOn(e.currentTarget.checked)} mb={8} />
        <NumberInput label="Rate (Mbit/s)" value={rateMbit} onChange={setRateMbit} min={0} max={(rate.max ?? 1e11) / 1e6} decimalScale={3} w={130} disabled={!shapingOn} />
        <NumberInput label="Queue (packets)" value={queue} onChange={setQueue} min={q.min} max={q.max} allowDecimal={false} w={130} />
        <Button
          variant="default"
          onClick={() =>
            onSet('shaping', { enabled: shapingOn, rate_bps: shapingOn ? Math.round(Number(rateMbit) * 1e6) : 0, queue_packets: Number(queue), overhead_bytes: 0 })
          }
        >
          Set shaping
        </Button>
      </Group>
      <Group align="flex-end" wrap="wrap">
        <Select label="Any section, from the gateway's defaults" placeholder="section" data={[...MANAGED_SECTIONS]} value={section} onChange={setSection} w={300} />
        <Button variant="default" disabled={!section} onClick={() => section && onDefault(section)}>
          Insert defaults
        </Button>
      </Group>
      <Text size="xs" c="dimmed">
        Each section sent replaces the terminal's own section whole, as written here: the defaults are a starting point, not what it runs.
      </Text>
    </Stack>
  );
}
