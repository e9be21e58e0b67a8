/*
 * version.h - the one version of vad: the daemon (--version, its hello reply, its log and
 * stats), libvad (vad.h's VAD_VERSION_STRING, checked equal to it) and vactl.
 */
#ifndef VAD_VERSION_H
#define VAD_VERSION_H

#define VAD_VERSION "0.1.0"

#endif
