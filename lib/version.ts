/** The kruntimes version, shared by every component. */
export const VERSION = '0.1.0';
