/** Reading docker-compose.yml services in tests (deploy.test.ts, compose-monitoring.test.ts). */
export type Service = Record<string, any>;

export interface Mount {
  source: string;
  target: string;
  readOnly: boolean;
}

/** `volumes` as mounts, from the long form or the short `src:dst[:ro]` form. */
export function mounts(service: Service): Mount[] {
  return ((service.volumes ?? []) as unknown[]).map((v: any): Mount => {
    if (typeof v === 'string') {
      const [source = '', target = '', mode = ''] = v.split(':');
      return { source, target, readOnly: mode.split(',').includes('ro') };
    }
    return { source: v.source, target: v.target, readOnly: v.read_only === true };
  });
}
