// The forms of the box's basic settings, shared by System settings and the first-login wizard. Each edits
// one part of a whole config and shows the gateway schema's finding for each field under it.
import { Grid, MultiSelect, NumberInput, SegmentedControl, Select, Switch, Text, Textarea } from '@mantine/core';
import { useState } from 'react';
import type { GatewayConfig, NetInterface } from '../api/endpoints';
import type { FieldErrors } from '../api/errors';
import { errorFor } from '../lib/field-errors';
import { bounds } from '../lib/schema-check';
import { choices, describeInterface, formatList, formatRoutes, parseList, parseRoutes, usableInterfaces } from '../lib/system-config';
import { formatBps, formatBytes } from '../lib/format';

export type Edit = (next: GatewayConfig) => void;

interface FormProps {
  config: GatewayConfig;
  errors: FieldErrors;
  onChange: Edit;
}

/** A whole-number config field with the schema's bounds; an emptied input is left to the schema to refuse. */
function IntField({ label, path, value, onChange, errors, description }: { label: string; path: string; value: number; onChange: (v: number) => void; errors: FieldErrors; description?: string }) {
  const { min, max } = bounds('GatewayConfig', path);
  return (
    <NumberInput
      label={label}
      value={value}
      min={min}
      max={max}
      clampBehavior="none"
      allowDecimal={false}
      thousandSeparator=","
      description={description}
      onChange={(v) => onChange(typeof v === 'number' ? v : Number.NaN)}
      error={errorFor(errors, path)}
    />
  );
}

/** Where each role of the gateway's schema stands (a label per role: the type checker holds it to the schema). */
const ROLE_WHERE: Record<GatewayConfig['role'], string> = { hub: 'at the teleport', terminal: 'at the remote site' };

export function RoleForm({ config, onChange }: FormProps) {
  return (
    <>
      <Text size="sm" fw={500} id="role-label">
        This gateway is the
      </Text>
      <SegmentedControl
        aria-labelledby="role-label"
        data={choices('Role').map((r) => ({ value: r, label: `${r} (${ROLE_WHERE[r as GatewayConfig['role']] ?? 'this box'})` }))}
        value={config.role}
        onChange={(v) => onChange({ ...config, role: v as GatewayConfig['role'] })}
      />
    </>
  );
}

export function InterfacesForm({ config, errors, onChange, interfaces }: FormProps & { interfaces: NetInterface[] }) {
  const usable = usableInterfaces(interfaces);
  const known = new Set(usable.map((i) => i.name));
  // A configured name the box does not have (a moved config) stays selectable, marked as missing.
  const option = (name: string) => {
    const i = usable.find((x) => x.name === name);
    return { value: name, label: i ? describeInterface(i) : `${name} — not on this box` };
  };
  const names = [...known, ...[config.interfaces.satellite, ...config.interfaces.lan].filter((n) => n && !known.has(n))];
  const unique = [...new Set(names)];
  return (
    <Grid>
      <Grid.Col span={{ base: 12, sm: 6 }}>
        <Select
          label="Satellite interface"
          description="Toward the satellite modem"
          placeholder="choose an interface"
          data={unique.filter((n) => !config.interfaces.lan.includes(n)).map(option)}
          value={config.interfaces.satellite || null}
          onChange={(v) => onChange({ ...config, interfaces: { ...config.interfaces, satellite: v ?? '' } })}
          error={errorFor(errors, 'interfaces.satellite')}
          allowDeselect={false}
        />
      </Grid.Col>
      <Grid.Col span={{ base: 12, sm: 6 }}>
        <MultiSelect
          label="LAN interfaces"
          description="Toward the users (or the terrestrial network, at a hub)"
          placeholder="choose one or more"
          data={unique.filter((n) => n !== config.interfaces.satellite).map(option)}
          value={config.interfaces.lan}
          onChange={(v) => onChange({ ...config, interfaces: { ...config.interfaces, lan: v } })}
          error={errorFor(errors, 'interfaces.lan')}
        />
      </Grid.Col>
    </Grid>
  );
}

/** A list typed one entry per line. The text stays as typed (a half-typed line, a trailing newline); the config
 * gets what it parses to. */
function ListField({ label, description, minRows, items, onChange, error }: { label: string; description: string; minRows: number; items: readonly string[]; onChange: (items: string[]) => void; error?: string }) {
  const [text, setText] = useState(formatList(items));
  return (
    <Textarea
      label={label}
      description={description}
      autosize
      minRows={minRows}
      value={text}
      onChange={(e) => {
        setText(e.currentTarget.value);
        onChange(parseList(e.currentTarget.value));
      }}
      error={error}
    />
  );
}

export function NetworksForm({ config, errors, onChange, onRouteError }: FormProps & { onRouteError: (e: string | undefined) => void }) {
  const [routes, setRoutes] = useState(formatRoutes(config.satellite.routes));
  const [routeError, setRouteError] = useState<string | undefined>();
  return (
    <Grid>
      <Grid.Col span={{ base: 12, sm: 6 }}>
        <ListField
          label="Served subnets"
          description="The users' networks whose TCP is split, one prefix per line"
          minRows={2}
          items={config.served_subnets}
          onChange={(served_subnets) => onChange({ ...config, served_subnets })}
          error={errorFor(errors, 'served_subnets')}
        />
      </Grid.Col>
      <Grid.Col span={{ base: 12, sm: 6 }}>
        <Textarea
          label="Routes across the satellite"
          description='The far side`s networks, one per line: "198.51.100.0/24 via 203.0.113.2"'
          autosize
          minRows={2}
          value={routes}
          onChange={(e) => {
            setRoutes(e.currentTarget.value);
            const parsed = parseRoutes(e.currentTarget.value);
            setRouteError(parsed.error);
            onRouteError(parsed.error);
            if (!parsed.error) onChange({ ...config, satellite: { ...config.satellite, routes: parsed.routes } });
          }}
          error={routeError ?? errorFor(errors, 'satellite.routes')}
        />
      </Grid.Col>
    </Grid>
  );
}

/** The resolvers Squid asks when the gateway's own resolver is off (`dns.upstream`): the box's network's, which
 * only the operator knows. */
export function ResolversForm({ config, errors, onChange }: FormProps) {
  return (
    <ListField
      label="Resolvers for the cache"
      description="The DNS resolvers Squid asks (port 53), one address per line, e.g. 198.51.100.53"
      minRows={1}
      items={config.dns.upstream}
      onChange={(upstream) => onChange({ ...config, dns: { ...config.dns, upstream } })}
      error={errorFor(errors, 'dns.upstream')}
    />
  );
}

const SYSTEM_DEFAULT = '(the system default)';

export function CongestionForm({ config, onChange }: FormProps) {
  const ccs = choices('CongestionControl');
  return (
    <Grid>
      <Grid.Col span={{ base: 12, sm: 6 }}>
        <Select
          label="Satellite leg"
          description="Hybla grows its window as fast at 600 ms as the reference does at 25 ms"
          data={ccs}
          value={config.satellite.congestion_control}
          onChange={(v) => v && onChange({ ...config, satellite: { ...config.satellite, congestion_control: v as GatewayConfig['satellite']['congestion_control'] } })}
          allowDeselect={false}
        />
      </Grid.Col>
      <Grid.Col span={{ base: 12, sm: 6 }}>
        <Select
          label="Terrestrial leg"
          description="The LAN side of each split flow"
          data={[SYSTEM_DEFAULT, ...ccs]}
          value={config.terrestrial.congestion_control || SYSTEM_DEFAULT}
          onChange={(v) =>
            onChange({ ...config, terrestrial: { congestion_control: (v === SYSTEM_DEFAULT || !v ? '' : v) as GatewayConfig['terrestrial']['congestion_control'] } })
          }
          allowDeselect={false}
        />
      </Grid.Col>
    </Grid>
  );
}

/** Each direction's rate field: the config key and which way the carrier runs. */
const LINK_RATES = [
  { key: 'forward_rate_bps', label: 'Forward rate (bit/s)', way: 'hub → terminal' },
  { key: 'return_rate_bps', label: 'Return rate (bit/s)', way: 'terminal → hub' },
] as const;

/** The carrier's rates, as the modem reports them: what the peer path may send twice of each flow's start
 * (docs/splitter.md, *Redundancy*) and the link's utilisation figures depend on them; 0 = unknown. */
export function LinkRatesForm({ config, errors, onChange }: FormProps) {
  const shown = (bps: number) => (bps > 0 ? formatBps(bps) : 'unknown: the peer path sends nothing twice');
  return (
    <Grid>
      {LINK_RATES.map(({ key, label, way }) => (
        <Grid.Col key={key} span={{ base: 12, sm: 6 }}>
          <IntField
            label={label}
            path={`satellite.${key}`}
            value={config.satellite[key]}
            onChange={(v) => onChange({ ...config, satellite: { ...config.satellite, [key]: v } })}
            errors={errors}
            description={`${way}, the carrier's rate: ${shown(config.satellite[key])}`}
          />
        </Grid.Col>
      ))}
    </Grid>
  );
}

export function SplitterForm({ config, errors, onChange }: FormProps) {
  const set = (k: keyof GatewayConfig['splitter']) => (v: number) => onChange({ ...config, splitter: { ...config.splitter, [k]: v } });
  const s = config.splitter;
  return (
    <Grid>
      <Grid.Col span={{ base: 6, sm: 3 }}>
        <IntField label="Max flows" path="splitter.max_flows" value={s.max_flows} onChange={set('max_flows')} errors={errors} description="beyond it, flows pass unsplit" />
      </Grid.Col>
      <Grid.Col span={{ base: 6, sm: 3 }}>
        <IntField label="Connect timeout (ms)" path="splitter.connect_timeout_ms" value={s.connect_timeout_ms} onChange={set('connect_timeout_ms')} errors={errors} />
      </Grid.Col>
      <Grid.Col span={{ base: 6, sm: 3 }}>
        <IntField label="Idle timeout (s)" path="splitter.idle_timeout_s" value={s.idle_timeout_s} onChange={set('idle_timeout_s')} errors={errors} />
      </Grid.Col>
      <Grid.Col span={{ base: 6, sm: 3 }}>
        <IntField
          label="Relay buffer (bytes)"
          path="splitter.relay_buffer_bytes"
          value={s.relay_buffer_bytes}
          onChange={set('relay_buffer_bytes')}
          errors={errors}
          description={Number.isFinite(s.relay_buffer_bytes) ? `${formatBytes(s.relay_buffer_bytes)} per direction` : undefined}
        />
      </Grid.Col>
    </Grid>
  );
}

export function CacheForm({ config, errors, onChange }: FormProps) {
  const c = config.cache;
  const set = (patch: Partial<GatewayConfig['cache']>) => onChange({ ...config, cache: { ...c, ...patch } });
  return (
    <Grid>
      <Grid.Col span={12}>
        <Switch label="Cache web objects (HTTP through Squid)" checked={c.enabled} onChange={(e) => set({ enabled: e.currentTarget.checked })} />
      </Grid.Col>
      <Grid.Col span={{ base: 6, sm: 3 }}>
        <IntField label="Memory (MB)" path="cache.memory_mb" value={c.memory_mb} onChange={(v) => set({ memory_mb: v })} errors={errors} />
      </Grid.Col>
      <Grid.Col span={{ base: 6, sm: 3 }}>
        <IntField label="Disk (MB)" path="cache.disk_mb" value={c.disk_mb} onChange={(v) => set({ disk_mb: v })} errors={errors} />
      </Grid.Col>
      <Grid.Col span={{ base: 6, sm: 3 }}>
        <Select label="Disk store" data={choices('Store')} value={c.store} onChange={(v) => v && set({ store: v as GatewayConfig['cache']['store'] })} allowDeselect={false} />
      </Grid.Col>
      <Grid.Col span={{ base: 6, sm: 3 }}>
        <IntField label="Largest object (MB)" path="cache.max_object_mb" value={c.max_object_mb} onChange={(v) => set({ max_object_mb: v })} errors={errors} />
      </Grid.Col>
    </Grid>
  );
}

export function ShapingForm({ config, errors, onChange }: FormProps) {
  const s = config.shaping;
  const set = (patch: Partial<GatewayConfig['shaping']>) => onChange({ ...config, shaping: { ...s, ...patch } });
  return (
    <Grid>
      <Grid.Col span={12}>
        <Switch label="Shape everything leaving the satellite interface" checked={s.enabled} onChange={(e) => set({ enabled: e.currentTarget.checked })} />
      </Grid.Col>
      <Grid.Col span={{ base: 6, sm: 4 }}>
        <IntField
          label="Rate (bit/s)"
          path="shaping.rate_bps"
          value={s.rate_bps}
          onChange={(v) => set({ rate_bps: v })}
          errors={errors}
          description={Number.isFinite(s.rate_bps) ? formatBps(s.rate_bps) : undefined}
        />
      </Grid.Col>
      <Grid.Col span={{ base: 6, sm: 4 }}>
        <IntField label="Framing overhead (bytes/packet)" path="shaping.overhead_bytes" value={s.overhead_bytes} onChange={(v) => set({ overhead_bytes: v })} errors={errors} />
      </Grid.Col>
      <Grid.Col span={{ base: 6, sm: 4 }}>
        <IntField label="Queue (packets)" path="shaping.queue_packets" value={s.queue_packets} onChange={(v) => set({ queue_packets: v })} errors={errors} />
      </Grid.Col>
    </Grid>
  );
}
